package main

import (
	"bufio"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

type node struct {
	csi.UnimplementedNodeServer
	dir string
	id  string
	// One publish or unpublish at a time: they are quick, and mount-table checks race otherwise.
	mu sync.Mutex
}

func newNode(dir, id string) (*node, error) {
	if err := os.MkdirAll(filepath.Join(dir, "volumes"), 0o755); err != nil {
		return nil, err
	}
	return &node{dir: dir, id: id}, nil
}

func (n *node) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	return &csi.NodeGetInfoResponse{NodeId: n.id}, nil
}

func (n *node) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	return &csi.NodeGetCapabilitiesResponse{Capabilities: []*csi.NodeServiceCapability{{
		Type: &csi.NodeServiceCapability_Rpc{Rpc: &csi.NodeServiceCapability_RPC{
			Type: csi.NodeServiceCapability_RPC_GET_VOLUME_STATS,
		}},
	}}}, nil
}

// volumeDir: the volume's directory, NOT_FOUND when there is none.
func (n *node) volumeDir(id string) (string, error) {
	if !validID(id) {
		return "", status.Errorf(codes.NotFound, "volume %q not found", id)
	}
	dir := filepath.Join(n.dir, "volumes", id)
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return "", status.Errorf(codes.NotFound, "volume %q not found", id)
	}
	return dir, nil
}

// required: INVALID_ARGUMENT naming the first empty value of the (what, value) pairs.
func required(pairs ...string) error {
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i+1] == "" {
			return status.Errorf(codes.InvalidArgument, "%s missing", pairs[i])
		}
	}
	return nil
}

// mountPoint: whether path is a mount point (in /proc/self/mountinfo; this process runs in
// the host's mount namespace, as the kubelet and containerd do).
func mountPoint(path string) (bool, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return false, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 64*1024), 1024*1024)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) > 4 && unescape(fields[4]) == path {
			return true, nil
		}
	}
	return false, s.Err()
}

// unescape the octal escapes of mountinfo (\040 for a space, ...).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// NodePublishVolume bind-mounts the volume's directory onto the target path (made here, as
// CSI asks of the plugin), read-only when asked.
func (n *node) NodePublishVolume(_ context.Context, req *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	target := req.GetTargetPath()
	if err := required("volume id", req.GetVolumeId(), "target path", target); err != nil {
		return nil, err
	}
	if req.GetVolumeCapability() == nil {
		return nil, status.Error(codes.InvalidArgument, "volume capability missing")
	}
	if err := checkCapabilities([]*csi.VolumeCapability{req.GetVolumeCapability()}); err != nil {
		return nil, err
	}
	src, err := n.volumeDir(req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	target = filepath.Clean(target)
	n.mu.Lock()
	defer n.mu.Unlock()
	mounted, err := mountPoint(target)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "reading the mount table: %v", err)
	}
	if mounted {
		return &csi.NodePublishVolumeResponse{}, nil
	}
	if err := os.MkdirAll(target, 0o750); err != nil {
		return nil, status.Errorf(codes.Internal, "making %s: %v", target, err)
	}
	if err := unix.Mount(src, target, "", unix.MS_BIND, ""); err != nil {
		return nil, status.Errorf(codes.Internal, "bind-mounting %s on %s: %v", src, target, err)
	}
	if req.GetReadonly() {
		if err := unix.Mount("", target, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
			_ = unix.Unmount(target, 0)
			return nil, status.Errorf(codes.Internal, "remounting %s read-only: %v", target, err)
		}
	}
	return &csi.NodePublishVolumeResponse{}, nil
}

// NodeUnpublishVolume unmounts the target path and removes it (only the empty directory: never
// what a failed unmount would leave visible through it).
func (n *node) NodeUnpublishVolume(_ context.Context, req *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	target := req.GetTargetPath()
	if err := required("volume id", req.GetVolumeId(), "target path", target); err != nil {
		return nil, err
	}
	target = filepath.Clean(target)
	n.mu.Lock()
	defer n.mu.Unlock()
	for {
		mounted, err := mountPoint(target)
		if err != nil {
			return nil, status.Errorf(codes.Internal, "reading the mount table: %v", err)
		}
		if !mounted {
			break
		}
		if err := unix.Unmount(target, 0); err != nil {
			if err := unix.Unmount(target, unix.MNT_DETACH); err != nil {
				return nil, status.Errorf(codes.Internal, "unmounting %s: %v", target, err)
			}
		}
	}
	if err := os.Remove(target); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, status.Errorf(codes.Internal, "removing %s: %v", target, err)
	}
	return &csi.NodeUnpublishVolumeResponse{}, nil
}

// NodeGetVolumeStats: the bytes and inodes the volume's files take, against its capacity.
func (n *node) NodeGetVolumeStats(_ context.Context, req *csi.NodeGetVolumeStatsRequest) (*csi.NodeGetVolumeStatsResponse, error) {
	if err := required("volume id", req.GetVolumeId(), "volume path", req.GetVolumePath()); err != nil {
		return nil, err
	}
	dir, err := n.volumeDir(req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	path := req.GetVolumePath()
	if !filepath.IsAbs(path) {
		return nil, status.Errorf(codes.NotFound, "volume %s is not at %q (not an absolute path)", req.GetVolumeId(), path)
	}
	if _, err := os.Stat(path); err != nil {
		return nil, status.Errorf(codes.NotFound, "volume %s is not at %s: %v", req.GetVolumeId(), path, err)
	}
	used, inodes, err := diskUsage(dir)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "measuring %s: %v", dir, err)
	}
	usageList := []*csi.VolumeUsage{{Unit: csi.VolumeUsage_BYTES, Used: used}}
	v := &volumeMeta{}
	if readJSON(filepath.Join(n.dir, "meta", "volumes", req.GetVolumeId()+".json"), v) == nil && v.Capacity > 0 {
		usageList[0].Total = v.Capacity
		usageList[0].Available = max(v.Capacity-used, 0)
	}
	usageList = append(usageList, &csi.VolumeUsage{Unit: csi.VolumeUsage_INODES, Used: inodes})
	return &csi.NodeGetVolumeStatsResponse{Usage: usageList}, nil
}
