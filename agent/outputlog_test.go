package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// writeAll writes records of a few bytes, alternating streams, and returns the combined bytes.
func writeAll(t *testing.T, l *outputLog, total int) []byte {
	t.Helper()
	var all []byte
	for i := 0; len(all) < total; i++ {
		stream := streamStdout
		if i%3 == 2 {
			stream = streamStderr
		}
		data := bytes.Repeat([]byte{byte('a' + i%26)}, 1+i%50)
		if err := l.write(stream, data); err != nil {
			t.Fatal(err)
		}
		all = append(all, data...)
	}
	return all
}

func joined(read outputRead) []byte {
	var all []byte
	for _, chunk := range read.chunks {
		all = append(all, chunk.data...)
	}
	return all
}

func TestOutputLogReadsFromAnyOffset(t *testing.T) {
	dir := t.TempDir()
	l := newOutputLog(dir, 1<<20, 4)
	all := writeAll(t, l, 600<<10) // marks every 256 KiB: reads seek to them
	l.close()
	reopened, err := openOutputLog(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, log := range []*outputLog{l, reopened} {
		for _, c := range []struct{ offset, limit int64 }{
			{0, 10}, {1, 100}, {300 << 10, 5000}, {int64(len(all)) - 3, 100}, {int64(len(all)), 100}, {0, 1 << 30},
		} {
			read, err := log.read(c.offset, c.limit)
			if err != nil {
				t.Fatal(err)
			}
			end := c.offset + c.limit
			if end > int64(len(all)) {
				end = int64(len(all))
			}
			if !bytes.Equal(joined(read), all[c.offset:end]) || read.next != end || read.dropped != 0 || !read.closed {
				t.Fatalf("read(%d, %d): %d bytes, next %d", c.offset, c.limit, len(joined(read)), read.next)
			}
		}
	}
}

func TestOutputLogKeepsStreamsApartInOrder(t *testing.T) {
	l := newOutputLog(t.TempDir(), 1<<20, 4)
	l.write(streamStdout, []byte("a"))
	l.write(streamStdout, []byte("b"))
	l.write(streamStderr, []byte("c"))
	l.write(streamStdout, []byte("d"))
	read, _ := l.read(0, 100)
	want := []outputChunk{{streamStdout, []byte("ab"), 2}, {streamStderr, []byte("c"), 3}, {streamStdout, []byte("d"), 4}}
	if len(read.chunks) != len(want) {
		t.Fatalf("chunks %+v", read.chunks)
	}
	for i, chunk := range read.chunks {
		if chunk.stream != want[i].stream || string(chunk.data) != string(want[i].data) || chunk.end != want[i].end {
			t.Fatalf("chunk %d: %+v", i, chunk)
		}
	}
}

func TestOutputLogDropsTheOldestSegments(t *testing.T) {
	dir := t.TempDir()
	l := newOutputLog(dir, 1000, 4)
	all := writeAll(t, l, 20000) // records split across segments too; three full segments and the last are kept
	segments, _ := filepath.Glob(filepath.Join(dir, "output.*"))
	if len(segments) != 4 {
		t.Fatalf("%d segments", len(segments))
	}
	read, err := l.read(0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	kept := joined(read)
	if read.dropped == 0 || read.dropped+int64(len(kept)) != int64(len(all)) || len(kept) > 4000 || len(kept) < 2000 {
		t.Fatalf("dropped %d, kept %d of %d", read.dropped, len(kept), len(all))
	}
	if !bytes.Equal(kept, all[read.dropped:]) {
		t.Fatal("the kept bytes are not the last ones")
	}
	// From within what is kept, nothing is dropped.
	if read, _ := l.read(read.dropped+1, 10); read.dropped != 0 || !bytes.Equal(joined(read), all[read.next-10:read.next]) {
		t.Fatalf("read %+v", read)
	}
}

func TestOutputLogLeavesOutARecordCutShort(t *testing.T) {
	dir := t.TempDir()
	l := newOutputLog(dir, 1<<20, 4)
	l.write(streamStdout, []byte("whole"))
	l.close()
	segment := l.segments[0].path
	file, _ := os.OpenFile(segment, os.O_WRONLY|os.O_APPEND, 0)
	file.Write([]byte{streamStdout, 0, 0, 0, 9, 'c', 'u', 't'}) // the agent died writing it
	file.Close()
	reopened, err := openOutputLog(dir)
	if err != nil {
		t.Fatal(err)
	}
	read, _ := reopened.read(0, 100)
	if string(joined(read)) != "whole" || read.next != 5 {
		t.Fatalf("read %q, next %d", joined(read), read.next)
	}
}

func TestOutputLogWakesWaitingReaders(t *testing.T) {
	l := newOutputLog(t.TempDir(), 1<<20, 4)
	woken := make(chan time.Time)
	go func() {
		l.wait(context.Background(), 0, 10*time.Second)
		woken <- time.Now()
	}()
	time.Sleep(50 * time.Millisecond)
	written := time.Now()
	l.write(streamStdout, []byte("x"))
	if delay := (<-woken).Sub(written); delay > 50*time.Millisecond {
		t.Fatalf("woken %v after the write", delay)
	}
	go func() {
		l.wait(context.Background(), 1, 10*time.Second)
		woken <- time.Now()
	}()
	time.Sleep(50 * time.Millisecond)
	closed := time.Now()
	l.close()
	if delay := (<-woken).Sub(closed); delay > 50*time.Millisecond {
		t.Fatalf("woken %v after the end", delay)
	}
}
