package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
)

// What the controller keeps of a volume (meta/volumes/<id>.json).
type volumeMeta struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	Capacity int64  `json:"capacityBytes"`
	// The content source: "snapshot" or "volume", and its id.
	SourceKind string            `json:"sourceKind,omitempty"`
	SourceID   string            `json:"sourceId,omitempty"`
	Parameters map[string]string `json:"parameters,omitempty"`
	Created    int64             `json:"createdUnixNano"`
}

// What the controller keeps of a snapshot (meta/snapshots/<id>.json).
type snapshotMeta struct {
	ID         string            `json:"id"`
	Name       string            `json:"name"`
	SourceID   string            `json:"sourceVolumeId"`
	Size       int64             `json:"sizeBytes"`
	Parameters map[string]string `json:"parameters,omitempty"`
	Created    int64             `json:"createdUnixNano"`
}

// A name that can serve as its own id (and directory name): Kubernetes' pvc-<uid> and
// snapshot-<uid> do, so the host's directories are named after the PV and the
// VolumeSnapshotContent.
var plainName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// idFor: the id of the object named name: the name itself when it is a plain one, else
// prefix + a hash of it. The same name always gets the same id (CSI's idempotency).
func idFor(prefix, name string) string {
	if plainName.MatchString(name) && !strings.HasPrefix(name, prefix) {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return prefix + hex.EncodeToString(sum[:16])
}

// validID: whether id could be one of ours (never a path outside the state dir).
func validID(id string) bool { return plainName.MatchString(id) && id != "." && id != ".." }

func writeJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func readJSON(path string, v any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, v)
}

// copyTree copies the contents of directory src into dst (which must not exist): every
// file, directory, link, owner, mode, time and extended attribute, hard links kept (cp -a).
func copyTree(src, dst string) error {
	if err := os.Mkdir(dst, 0o755); err != nil {
		return err
	}
	out, err := exec.Command("cp", "-a", "--reflink=auto", src+"/.", dst+"/").CombinedOutput()
	if err != nil {
		return fmt.Errorf("cp -a %s %s: %v: %s", src, dst, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// diskUsage: the bytes and inodes under dir, as `du -sb` counts them (apparent sizes, every
// directory included, each hard-linked inode once).
func diskUsage(dir string) (bytes, inodes int64, err error) {
	seen := map[uint64]bool{}
	err = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 && !info.IsDir() {
			if seen[st.Ino] {
				return nil
			}
			seen[st.Ino] = true
		}
		bytes += info.Size()
		inodes++
		return nil
	})
	return bytes, inodes, err
}
