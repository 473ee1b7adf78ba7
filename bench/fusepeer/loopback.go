package main

import (
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// serveLoopback shows directory src at mnt through go-fuse's loopback
// filesystem, with the settings of go-fuse's example/loopback (one
// second entry and attribute timeouts, go-fuse's default MaxWrite and
// capabilities), until it is unmounted or gets SIGINT or SIGTERM.
func serveLoopback(src, mnt string) error {
	root, err := fs.NewLoopbackRoot(src)
	if err != nil {
		return err
	}
	sec := time.Second
	opts := &fs.Options{
		AttrTimeout:     &sec,
		EntryTimeout:    &sec,
		NullPermissions: true,
		MountOptions: fuse.MountOptions{
			FsName: src,
			Name:   "loopback",
			// FUSEPEER_DEBUG=1 logs every request, to count them by
			// opcode against gobtrfs mount --debug.
			Debug: os.Getenv("FUSEPEER_DEBUG") != "",
		},
	}
	srv, err := fs.Mount(mnt, root, opts)
	if err != nil {
		return err
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		<-sigs
		_ = srv.Unmount()
	}()
	srv.Wait()
	return nil
}
