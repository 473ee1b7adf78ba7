// Package fileio is sysbench's fileio benchmark run inside the process,
// against a btrfs image through the filesystem's public write API
// (btrfs.OpenWritable): files opened once with FS.OpenFile, File.WriteAt
// and ReadAt for requests, File.Sync for fsync. It exists to reproduce the measurement of the
// seed patch ("Btrfs: more efficient push_leaf_right": sysbench fileio, 512
// threads, 512 files, 8 KiB requests, fsync every 100) through our own
// filesystem, and reports, besides sysbench's figures, the B-tree engine's
// counters per tree (btrfs.FS.WriteCounters).
//
// # What is sysbench's
//
// Files test_file.0 .. test_file.N-1 of --file-total-size / --file-num
// bytes each. Prepare writes them in --file-block-size writes and fsyncs
// each. One request generator, under one lock, hands every thread its
// next event as sysbench 1.0.20 does:
//
//   - seqwr, seqrewr, seqrd: block after block, file after file; past the
//     last file the sequence starts again at the first, until the run
//     ends (sysbench does not stop after one pass either). seqwr starts
//     from empty files, so its first pass extends them.
//   - rndrd, rndwr, rndrw: a uniformly random block-aligned position over
//     all files; rndrw reads while completed reads / completed writes
//     (each plus one) is below --file-rw-ratio, else writes.
//   - --file-fsync-freq N: after every N reads or writes handed out (over
//     all threads), if one was a write since the last round, the next
//     --file-num events fsync the files in turn. 0 turns it off.
//   - --file-fsync-end (on unless --file-fsync-end=off): in write modes,
//     each thread fsyncs every file when it stops; these count as fsyncs,
//     not as events (Result.FsyncsAtEnd tells how many: threads x files).
//   - The run ends after --time (10 s; 0 is no limit) or --events (0, no
//     limit) events, whichever comes first; an event is a read, a write
//     or an fsync. Latency is per event; Result.LatencyByOpMS splits it
//     by kind, since fsyncs of clean files return at once and crowd the
//     per-event figure.
//
// # Differences from sysbench (the command's help repeats them)
//
//   - The image is the filesystem: files live in it, not in the current
//     directory, and nothing goes through the kernel.
//   - fsync is File.Sync: while the running transaction holds only data
//     writes to files that existed at the last commit, it writes the tree
//     log as the kernel does (docs/design/0019); otherwise it commits the
//     whole filesystem, where the kernel would log names and new files
//     too. An fsync of a file with no write since the last commit returns
//     at once, as fsync of a clean file does on Linux; `commits` counts
//     the commits made, not log writes.
//   - seqwr's prepare removes the files and creates them empty; sysbench's
//     prepare removes them and its run creates them. Either way the timed
//     phase starts from empty files; here both runs of a comparison start
//     from the same image.
//   - Every file is opened once and kept open, as sysbench does; reads,
//     writes (File.WriteAt, by inode) and fsyncs (File.Sync) go through
//     the handle. Reads never wait for one another and writes to
//     different files run in parallel (docs/design/0009).
//   - Written data is zeros, as sysbench writes without --validate; with
//     Verify (tests) every block is self-describing and random requests
//     avoid blocks another thread holds, as sysbench's --validate does.
//   - With --file-fsync-end=off the changes are committed after the timed
//     phase (by Close, which commits).
//   - Only sysbench's synchronous I/O mode exists; --file-io-mode,
//     --file-extra-flags, --file-fsync-all, --file-fsync-mode and
//     --file-merged-requests are not offered.
//
// The package keeps no global state; a run's counters start when its FS
// is opened, so they cover the run only.
package fileio
