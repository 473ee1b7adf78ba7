package blockdev

import (
	"bytes"
	"testing"
)

func TestOverlay(t *testing.T) {
	base := NewMem(3*overlayPage + 100)
	orig := bytes.Repeat([]byte{7}, int(base.Size()))
	if _, err := base.WriteAt(orig, 0); err != nil {
		t.Fatal(err)
	}
	o := NewOverlay(base, true)
	w := bytes.Repeat([]byte{9}, overlayPage+10)
	if _, err := o.WriteAt(w, overlayPage-5); err != nil {
		t.Fatal(err)
	}
	want := append([]byte(nil), orig...)
	copy(want[overlayPage-5:], w)
	got := make([]byte, len(want))
	if n, err := o.ReadAt(got, 0); err != nil || n != len(got) || !bytes.Equal(got, want) {
		t.Fatalf("overlay read %d %v, equal %v", n, err, bytes.Equal(got, want))
	}
	b := make([]byte, len(orig))
	if _, err := base.ReadAt(b, 0); err != nil || !bytes.Equal(b, orig) {
		t.Fatal("base changed")
	}
	r := o.Reopen(false)
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.WriteAt([]byte{1}, 0); err != nil {
		t.Fatal(err)
	}
	copy(want, []byte{1})
	if _, err := r.ReadAt(got, 0); err != nil || !bytes.Equal(got, want) {
		t.Fatal("reopened overlay reads wrong bytes")
	}
	// Tail page shorter than overlayPage.
	if _, err := r.WriteAt([]byte{5}, base.Size()-1); err != nil {
		t.Fatal(err)
	}
	if _, err := r.WriteAt([]byte{5, 5}, base.Size()-1); err == nil {
		t.Fatal("write past the end accepted")
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
}
