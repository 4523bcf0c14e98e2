package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// The machine's files, by absolute path, as root.

type fileStat struct {
	Type       string `json:"type"`
	Size       int64  `json:"size"`
	ModifiedAt int64  `json:"modifiedAt"`
	Mode       uint32 `json:"mode"` // the permission bits with setuid, setgid and sticky, as chmod takes them
}

type directoryEntry struct {
	Name       string `json:"name"`
	Type       string `json:"type"`
	Size       int64  `json:"size"`
	ModifiedAt int64  `json:"modifiedAt"`
}

// pathParam is the request's `path`, which must be absolute.
func pathParam(r *http.Request) (string, error) {
	path := r.URL.Query().Get("path")
	if !filepath.IsAbs(path) {
		return "", invalid("path must be absolute, not %q", path)
	}
	return filepath.Clean(path), nil
}

// pathAndFlag reads the path and one 0/1 option, what writing, deleting and watching take.
func pathAndFlag(r *http.Request, flag string) (string, bool, error) {
	path, err := pathParam(r)
	if err != nil {
		return "", false, err
	}
	set, err := flagParam(r, flag)
	return path, set, err
}

func fileType(mode fs.FileMode) string {
	switch {
	case mode.IsRegular():
		return "file"
	case mode.IsDir():
		return "directory"
	case mode&fs.ModeSymlink != 0:
		return "symlink"
	}
	return "other"
}

// fileError is a file system error as the API answers it: missing paths are 404.
func fileError(path string, err error) error {
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return notFound("no such path: %s", path)
	}
	return err
}

func (a *agent) statFile(w http.ResponseWriter, r *http.Request, _ []string) error {
	path, err := pathParam(r)
	if err != nil {
		return err
	}
	info, err := os.Lstat(path)
	if err != nil {
		return fileError(path, err)
	}
	var mode uint32
	if status, ok := info.Sys().(*syscall.Stat_t); ok {
		mode = status.Mode & 0o7777
	}
	return writeJSON(w, http.StatusOK, fileStat{
		Type:       fileType(info.Mode()),
		Size:       info.Size(),
		ModifiedAt: info.ModTime().UnixMilli(),
		Mode:       mode,
	})
}

func (a *agent) listFiles(w http.ResponseWriter, r *http.Request, _ []string) error {
	path, err := pathParam(r)
	if err != nil {
		return err
	}
	info, err := os.Stat(path)
	if err != nil {
		return fileError(path, err)
	}
	if !info.IsDir() {
		return conflict("%s is not a directory", path)
	}
	entries, err := os.ReadDir(path) // sorted by name
	if err != nil {
		return fileError(path, err)
	}
	listed := make([]directoryEntry, 0, len(entries))
	for _, entry := range entries {
		info, err := entry.Info() // not followed: a symlink is listed as one
		if err != nil {
			continue // removed since the directory was read
		}
		kind := fileType(info.Mode())
		if kind == "other" {
			continue
		}
		listed = append(listed, directoryEntry{Name: entry.Name(), Type: kind, Size: info.Size(), ModifiedAt: info.ModTime().UnixMilli()})
	}
	return writeJSON(w, http.StatusOK, map[string]interface{}{"data": listed})
}

func (a *agent) readFile(w http.ResponseWriter, r *http.Request, _ []string) error {
	path, err := pathParam(r)
	if err != nil {
		return err
	}
	// Stat before opening: opening a FIFO would wait for a writer.
	info, err := os.Stat(path)
	if err != nil {
		return fileError(path, err)
	}
	if !info.Mode().IsRegular() {
		kind := "other"
		if info.IsDir() {
			kind = "directory"
		}
		return &apiError{status: http.StatusConflict, code: "conflict",
			message: fmt.Sprintf("%s is not a file", path), extra: map[string]string{"type": kind}}
	}
	file, err := os.Open(path)
	if err != nil {
		return fileError(path, err)
	}
	defer file.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(info.Size(), 10))
	w.WriteHeader(http.StatusOK)
	// As many bytes as announced, even if the file grows meanwhile.
	if _, err := io.CopyN(w, file, info.Size()); err != nil {
		panic(http.ErrAbortHandler) // it shrank, or the client went away: the answer cannot be whole
	}
	return nil
}

func (a *agent) writeFile(w http.ResponseWriter, r *http.Request, _ []string) error {
	path, appending, err := pathAndFlag(r, "append")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		if errors.Is(err, syscall.ENOTDIR) || errors.Is(err, fs.ErrExist) {
			return conflict("a parent of %s is a file where a directory is needed", path)
		}
		return err
	}
	flags := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	if appending {
		flags = os.O_WRONLY | os.O_CREATE | os.O_APPEND
	}
	file, err := os.OpenFile(path, flags, 0o644)
	if err != nil {
		if errors.Is(err, syscall.EISDIR) {
			return conflict("%s is a directory where a file is needed", path)
		}
		return err
	}
	_, err = io.Copy(file, r.Body)
	if closeErr := file.Close(); err == nil {
		err = closeErr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (a *agent) deleteFile(w http.ResponseWriter, r *http.Request, _ []string) error {
	path, recursive, err := pathAndFlag(r, "recursive")
	if err != nil {
		return err
	}
	info, err := os.Lstat(path)
	if err != nil {
		return fileError(path, err)
	}
	if info.IsDir() && !recursive {
		return conflict("%s is a directory: delete it with recursive=1", path)
	}
	if recursive {
		err = os.RemoveAll(path)
	} else {
		err = os.Remove(path)
	}
	if err != nil {
		return fmt.Errorf("delete %s: %w", path, err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
