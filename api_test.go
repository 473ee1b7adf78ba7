package btrfs_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// publicPackages are the directories of the packages a Go programmer
// imports; their exported API must name no internal package, which the
// programmer could neither import nor name (docs/design/0014-public-api.md).
var publicPackages = []string{".", "mkfs", "fuse"}

// TestPublicAPINamesNoInternalType parses the non-test files of the public
// packages (every build tag) and fails for each exported function, method,
// type, field, variable or constant whose declared type mentions a package
// under internal/.
func TestPublicAPINamesNoInternalType(t *testing.T) {
	var bad []string
	for _, dir := range publicPackages {
		bad = append(bad, internalUses(t, dir)...)
	}
	sort.Strings(bad)
	for _, b := range bad {
		t.Errorf("exported API names an internal type: %s", b)
	}
}

func internalUses(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var bad []string
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		internal := map[string]string{} // local package name -> import path
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if !strings.Contains(p, "/internal/") {
				continue
			}
			local := path.Base(p)
			if imp.Name != nil {
				local = imp.Name.Name
			}
			internal[local] = p
		}
		if len(internal) == 0 {
			continue
		}
		report := func(what string, n ast.Node) {
			if p := mentions(n, internal); p != "" {
				bad = append(bad, fset.Position(n.Pos()).String()+": "+what+" uses "+p)
			}
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() || (d.Recv != nil && !exportedRecv(d.Recv)) {
					continue
				}
				report(d.Name.Name, d.Type)
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() {
							report(s.Name.Name, exportedPart(s.Type))
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() && s.Type != nil {
								report(n.Name, s.Type)
							}
						}
					}
				}
			}
		}
	}
	return bad
}

// exportedRecv reports whether a method's receiver type is exported.
func exportedRecv(fl *ast.FieldList) bool {
	x := fl.List[0].Type
	for {
		switch y := x.(type) {
		case *ast.StarExpr:
			x = y.X
		case *ast.IndexExpr:
			x = y.X
		case *ast.IndexListExpr:
			x = y.X
		case *ast.Ident:
			return y.IsExported()
		default:
			return true
		}
	}
}

// exportedPart drops the unexported fields of a struct and the unexported
// methods of an interface, which users cannot reach.
func exportedPart(x ast.Expr) ast.Node {
	var fl *ast.FieldList
	switch y := x.(type) {
	case *ast.StructType:
		fl = y.Fields
	case *ast.InterfaceType:
		fl = y.Methods
	default:
		return x
	}
	keep := &ast.FieldList{}
	for _, f := range fl.List {
		if len(f.Names) == 0 {
			keep.List = append(keep.List, f) // embedded: promoted
			continue
		}
		for _, n := range f.Names {
			if n.IsExported() {
				keep.List = append(keep.List, f)
				break
			}
		}
	}
	return keep
}

// mentions returns the internal import path a qualified identifier in n
// refers to, or "".
func mentions(n ast.Node, internal map[string]string) string {
	found := ""
	ast.Inspect(n, func(n ast.Node) bool {
		if found != "" {
			return false
		}
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if id, ok := sel.X.(*ast.Ident); ok {
				if p, ok := internal[id.Name]; ok {
					found = p + "." + sel.Sel.Name
				}
			}
		}
		return true
	})
	return found
}
