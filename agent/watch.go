package main

import (
	"io/fs"
	"log"
	"net/http"
	"os"
	"path/filepath"

	"github.com/fsnotify/fsnotify"
)

// The kinds of change a watch reports, in the order one event's lines come.
var changeTypes = []struct {
	op   fsnotify.Op
	name string
}{
	{fsnotify.Create, "create"},
	{fsnotify.Write, "write"},
	{fsnotify.Remove, "remove"},
	{fsnotify.Rename, "rename"},
	{fsnotify.Chmod, "chmod"},
}

type changeLine struct {
	Type string `json:"type"`
	Path string `json:"path"`
	At   int64  `json:"at"`
}

func (a *agent) watchFiles(w http.ResponseWriter, r *http.Request, _ []string) error {
	path, recursive, err := pathAndFlag(r, "recursive")
	if err != nil {
		return err
	}
	info, err := os.Stat(path)
	if err != nil {
		return fileError(path, err)
	}
	watcher, err := fsnotify.NewWatcher()
	if err != nil {
		return err
	}
	defer watcher.Close()
	if recursive && info.IsDir() {
		err = watchTree(watcher, path)
	} else {
		err = watcher.Add(path)
	}
	if err != nil {
		return fileError(path, err)
	}

	stream := startNDJSON(w)
	if stream.send(map[string]string{"type": "ready"}) != nil {
		return nil
	}
	for {
		select {
		case event, open := <-watcher.Events:
			if !open {
				return nil
			}
			if recursive && event.Has(fsnotify.Create) {
				if info, err := os.Lstat(event.Name); err == nil && info.IsDir() {
					watchTree(watcher, event.Name) // a new directory: its changes are under the path too
				}
			}
			at := nowMs()
			for _, change := range changeTypes {
				if event.Has(change.op) {
					if stream.send(changeLine{Type: change.name, Path: event.Name, At: at}) != nil {
						return nil
					}
				}
			}
		case err, open := <-watcher.Errors:
			if !open {
				return nil
			}
			log.Printf("watch %s: %v", path, err) // the kernel's queue overflowed: some changes are not told
		case <-r.Context().Done():
			return nil
		}
	}
}

// watchTree watches a directory and every directory under it; those it cannot read are left out.
func watchTree(watcher *fsnotify.Watcher, root string) error {
	if err := watcher.Add(root); err != nil {
		return err
	}
	return filepath.WalkDir(root, func(path string, entry fs.DirEntry, err error) error {
		if err == nil && entry.IsDir() && path != root {
			watcher.Add(path)
		}
		return nil
	})
}
