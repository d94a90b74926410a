package main

import (
	"context"
	"log"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// The capacity of a volume whose request names none.
const defaultCapacity = 1 << 30

// The name of the VolumeSnapshot whose snapshot's volumes never provision (the injected
// fault), and the parameter the csi-snapshotter passes it in (--extra-create-metadata).
const (
	neverBindsSnapshot  = "never-binds"
	volumeSnapshotParam = "csi.storage.k8s.io/volumesnapshot/name"
)

type controller struct {
	csi.UnimplementedControllerServer
	dir string

	mu        sync.Mutex
	volumes   map[string]*volumeMeta
	snapshots map[string]*snapshotMeta
	// Ids with an operation in progress (a create, a delete, or a copy reading them): another
	// operation on them is ABORTED, as CSI asks ("operation pending").
	busy map[string]int
}

func newController(dir string) (*controller, error) {
	c := &controller{dir: dir, volumes: map[string]*volumeMeta{}, snapshots: map[string]*snapshotMeta{}, busy: map[string]int{}}
	for _, d := range []string{"volumes", "snapshots", "meta/volumes", "meta/snapshots"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	// What a killed create left: temporary copies, data without metadata.
	for _, kind := range []string{"volumes", "snapshots"} {
		entries, err := os.ReadDir(filepath.Join(dir, kind))
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			meta := filepath.Join(dir, "meta", kind, e.Name()+".json")
			if _, err := os.Stat(meta); err != nil {
				log.Printf("removing %s/%s (no metadata: an unfinished create)", kind, e.Name())
				_ = os.RemoveAll(filepath.Join(dir, kind, e.Name()))
			}
		}
		metas, _ := filepath.Glob(filepath.Join(dir, "meta", kind, "*.json"))
		for _, m := range metas {
			id := strings.TrimSuffix(filepath.Base(m), ".json")
			if _, err := os.Stat(filepath.Join(dir, kind, id)); err != nil {
				_ = os.Remove(m)
				continue
			}
			if kind == "volumes" {
				v := &volumeMeta{}
				if err := readJSON(m, v); err != nil {
					return nil, err
				}
				c.volumes[v.ID] = v
			} else {
				s := &snapshotMeta{}
				if err := readJSON(m, s); err != nil {
					return nil, err
				}
				c.snapshots[s.ID] = s
			}
		}
	}
	log.Printf("%d volumes, %d snapshots in %s", len(c.volumes), len(c.snapshots), dir)
	return c, nil
}

func (c *controller) volumeDir(id string) string   { return filepath.Join(c.dir, "volumes", id) }
func (c *controller) snapshotDir(id string) string { return filepath.Join(c.dir, "snapshots", id) }
func (c *controller) volumeMetaPath(id string) string {
	return filepath.Join(c.dir, "meta", "volumes", id+".json")
}
func (c *controller) snapshotMetaPath(id string) string {
	return filepath.Join(c.dir, "meta", "snapshots", id+".json")
}

// hold marks keys busy (under c.mu): "volume/ID" and "snapshot/ID" while that object is
// made or deleted, "volume/ID/read" and "snapshot/ID/read" while copies read it.
func (c *controller) hold(keys ...string) {
	for _, k := range keys {
		c.busy[k]++
	}
}

func (c *controller) release(keys ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range keys {
		if c.busy[k]--; c.busy[k] <= 0 {
			delete(c.busy, k)
		}
	}
}

func (c *controller) ControllerGetCapabilities(context.Context, *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	var caps []*csi.ControllerServiceCapability
	for _, t := range []csi.ControllerServiceCapability_RPC_Type{
		csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME,
		csi.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT,
		csi.ControllerServiceCapability_RPC_LIST_SNAPSHOTS,
		csi.ControllerServiceCapability_RPC_CLONE_VOLUME,
		csi.ControllerServiceCapability_RPC_LIST_VOLUMES,
	} {
		caps = append(caps, &csi.ControllerServiceCapability{Type: &csi.ControllerServiceCapability_Rpc{
			Rpc: &csi.ControllerServiceCapability_RPC{Type: t},
		}})
	}
	return &csi.ControllerGetCapabilitiesResponse{Capabilities: caps}, nil
}

// checkCapabilities: a directory serves any access mode (there is one node) as a mounted
// filesystem; raw block volumes it cannot give.
func checkCapabilities(caps []*csi.VolumeCapability) error {
	if len(caps) == 0 {
		return status.Error(codes.InvalidArgument, "volume capabilities missing")
	}
	for _, c := range caps {
		if c.GetAccessMode() == nil {
			return status.Error(codes.InvalidArgument, "a volume capability without an access mode")
		}
		if c.GetBlock() != nil {
			return status.Error(codes.InvalidArgument, "block volumes are not supported: a volume is a directory")
		}
		if c.GetMount() == nil {
			return status.Error(codes.InvalidArgument, "a volume capability without an access type")
		}
	}
	return nil
}

func (c *controller) volume(v *volumeMeta) *csi.Volume {
	out := &csi.Volume{VolumeId: v.ID, CapacityBytes: v.Capacity}
	switch v.SourceKind {
	case "snapshot":
		out.ContentSource = &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{
			Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: v.SourceID}}}
	case "volume":
		out.ContentSource = &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{
			Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: v.SourceID}}}
	}
	return out
}

func (c *controller) CreateVolume(_ context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	name := req.GetName()
	if name == "" {
		return nil, status.Error(codes.InvalidArgument, "name missing")
	}
	if err := checkCapabilities(req.GetVolumeCapabilities()); err != nil {
		return nil, err
	}
	if len(req.GetMutableParameters()) > 0 {
		return nil, status.Error(codes.InvalidArgument, "mutable parameters are not supported")
	}
	required, limit := req.GetCapacityRange().GetRequiredBytes(), req.GetCapacityRange().GetLimitBytes()
	if required < 0 || limit < 0 || (limit > 0 && required > limit) {
		return nil, status.Errorf(codes.InvalidArgument, "capacity range: required %d > limit %d", required, limit)
	}
	capacity := required
	if capacity == 0 {
		capacity = limit
	}
	if capacity == 0 {
		capacity = defaultCapacity
	}
	sourceKind, sourceID := "", ""
	if s := req.GetVolumeContentSource(); s != nil {
		switch {
		case s.GetSnapshot() != nil:
			sourceKind, sourceID = "snapshot", s.GetSnapshot().GetSnapshotId()
		case s.GetVolume() != nil:
			sourceKind, sourceID = "volume", s.GetVolume().GetVolumeId()
		default:
			return nil, status.Error(codes.InvalidArgument, "unknown volume content source")
		}
		if sourceID == "" {
			return nil, status.Errorf(codes.InvalidArgument, "the %s source has no id", sourceKind)
		}
	}
	id := idFor("vol-", name)

	c.mu.Lock()
	if v, ok := c.volumes[id]; ok {
		c.mu.Unlock()
		if v.Name != name || v.Capacity < required || (limit > 0 && v.Capacity > limit) ||
			v.SourceKind != sourceKind || v.SourceID != sourceID {
			return nil, status.Errorf(codes.AlreadyExists,
				"volume %q exists with capacity %d and source %q %q", name, v.Capacity, v.SourceKind, v.SourceID)
		}
		return &csi.CreateVolumeResponse{Volume: c.volume(v)}, nil
	}
	var from string
	switch sourceKind {
	case "snapshot":
		s, ok := c.snapshots[sourceID]
		if !ok {
			c.mu.Unlock()
			return nil, status.Errorf(codes.NotFound, "source snapshot %q not found", sourceID)
		}
		if s.Parameters[volumeSnapshotParam] == neverBindsSnapshot {
			c.mu.Unlock()
			return nil, status.Errorf(codes.ResourceExhausted,
				"fault injected by the test environment: snapshot %s was taken for VolumeSnapshot %q, "+
					"whose volumes never provision (scripts/k8s-testenv)", sourceID, neverBindsSnapshot)
		}
		if capacity < s.Size {
			c.mu.Unlock()
			return nil, status.Errorf(codes.OutOfRange, "capacity %d is below the snapshot's size %d", capacity, s.Size)
		}
		from = c.snapshotDir(sourceID)
	case "volume":
		v, ok := c.volumes[sourceID]
		if !ok {
			c.mu.Unlock()
			return nil, status.Errorf(codes.NotFound, "source volume %q not found", sourceID)
		}
		if capacity < v.Capacity {
			c.mu.Unlock()
			return nil, status.Errorf(codes.OutOfRange, "capacity %d is below the source volume's %d", capacity, v.Capacity)
		}
		from = c.volumeDir(sourceID)
	}
	keys := []string{"volume/" + id}
	if sourceKind != "" {
		keys = append(keys, sourceKind+"/"+sourceID+"/read")
	}
	// Copies of one source may run side by side; a delete of it may not.
	if c.busy["volume/"+id] > 0 || c.busy[sourceKind+"/"+sourceID] > 0 {
		c.mu.Unlock()
		return nil, status.Errorf(codes.Aborted, "an operation on volume %q or its source is in progress", name)
	}
	c.hold(keys...)
	c.mu.Unlock()
	defer c.release(keys...)

	dir := c.volumeDir(id)
	_ = os.RemoveAll(dir)
	var err error
	if from != "" {
		err = copyTree(from, dir)
	} else if err = os.Mkdir(dir, 0o755); err == nil {
		// As a fresh filesystem's root: whatever umask the driver runs with.
		err = os.Chmod(dir, 0o755)
	}
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, status.Errorf(codes.Internal, "making volume %s: %v", id, err)
	}
	v := &volumeMeta{ID: id, Name: name, Capacity: capacity, SourceKind: sourceKind, SourceID: sourceID,
		Parameters: req.GetParameters(), Created: time.Now().UnixNano()}
	if err := writeJSON(c.volumeMetaPath(id), v); err != nil {
		_ = os.RemoveAll(dir)
		return nil, status.Errorf(codes.Internal, "recording volume %s: %v", id, err)
	}
	c.mu.Lock()
	c.volumes[id] = v
	c.mu.Unlock()
	return &csi.CreateVolumeResponse{Volume: c.volume(v)}, nil
}

func (c *controller) DeleteVolume(_ context.Context, req *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	return &csi.DeleteVolumeResponse{}, c.remove("volume", req.GetVolumeId())
}

// known: whether the controller has volume or snapshot id (under c.mu).
func (c *controller) known(kind, id string) bool {
	if kind == "volume" {
		_, ok := c.volumes[id]
		return ok
	}
	_, ok := c.snapshots[id]
	return ok
}

// remove deletes a volume or snapshot, idempotently (one that does not exist is gone
// already): its metadata, then its directory. ABORTED while a copy reads it.
func (c *controller) remove(kind, id string) error {
	if id == "" {
		return status.Errorf(codes.InvalidArgument, "%s id missing", kind)
	}
	key := kind + "/" + id
	c.mu.Lock()
	if !c.known(kind, id) || !validID(id) {
		c.mu.Unlock()
		return nil
	}
	if c.busy[key+"/read"] > 0 || c.busy[key] > 0 {
		c.mu.Unlock()
		return status.Errorf(codes.Aborted, "an operation on %s %s is in progress", kind, id)
	}
	c.hold(key)
	c.mu.Unlock()
	defer c.release(key)
	if err := os.Remove(filepath.Join(c.dir, "meta", kind+"s", id+".json")); err != nil && !os.IsNotExist(err) {
		return status.Errorf(codes.Internal, "removing %s %s: %v", kind, id, err)
	}
	c.mu.Lock()
	if kind == "volume" {
		delete(c.volumes, id)
	} else {
		delete(c.snapshots, id)
	}
	c.mu.Unlock()
	// The metadata is gone, so it is gone for CSI; a restart removes what stays.
	if err := os.RemoveAll(filepath.Join(c.dir, kind+"s", id)); err != nil {
		log.Printf("removing %s %s: %v", kind, id, err)
	}
	return nil
}

func (c *controller) ValidateVolumeCapabilities(_ context.Context, req *csi.ValidateVolumeCapabilitiesRequest) (*csi.ValidateVolumeCapabilitiesResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume id missing")
	}
	if len(req.GetVolumeCapabilities()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "volume capabilities missing")
	}
	c.mu.Lock()
	_, ok := c.volumes[req.GetVolumeId()]
	c.mu.Unlock()
	if !ok {
		return nil, status.Errorf(codes.NotFound, "volume %q not found", req.GetVolumeId())
	}
	if err := checkCapabilities(req.GetVolumeCapabilities()); err != nil {
		return &csi.ValidateVolumeCapabilitiesResponse{Message: status.Convert(err).Message()}, nil
	}
	return &csi.ValidateVolumeCapabilitiesResponse{Confirmed: &csi.ValidateVolumeCapabilitiesResponse_Confirmed{
		VolumeContext:      req.GetVolumeContext(),
		VolumeCapabilities: req.GetVolumeCapabilities(),
		Parameters:         req.GetParameters(),
	}}, nil
}

// before: the order of lists (and so of their pages): by creation, then id.
func before(created1 int64, id1 string, created2 int64, id2 string) bool {
	if created1 != created2 {
		return created1 < created2
	}
	return id1 < id2
}

// page: entries [start, start+max) of n, and the next token; tokens are indexes.
func page(token string, max int32, n int) (int, int, string, error) {
	start := 0
	if token != "" {
		i, err := strconv.Atoi(token)
		if err != nil || i < 0 || i > n {
			return 0, 0, "", status.Errorf(codes.Aborted, "invalid starting token %q", token)
		}
		start = i
	}
	end := n
	if max < 0 {
		return 0, 0, "", status.Error(codes.InvalidArgument, "negative max_entries")
	}
	if max > 0 && start+int(max) < n {
		end = start + int(max)
	}
	next := ""
	if end < n {
		next = strconv.Itoa(end)
	}
	return start, end, next, nil
}

func (c *controller) ListVolumes(_ context.Context, req *csi.ListVolumesRequest) (*csi.ListVolumesResponse, error) {
	c.mu.Lock()
	all := make([]*volumeMeta, 0, len(c.volumes))
	for _, v := range c.volumes {
		all = append(all, v)
	}
	c.mu.Unlock()
	sort.Slice(all, func(i, j int) bool { return before(all[i].Created, all[i].ID, all[j].Created, all[j].ID) })
	start, end, next, err := page(req.GetStartingToken(), req.GetMaxEntries(), len(all))
	if err != nil {
		return nil, err
	}
	out := &csi.ListVolumesResponse{NextToken: next}
	for _, v := range all[start:end] {
		out.Entries = append(out.Entries, &csi.ListVolumesResponse_Entry{Volume: c.volume(v)})
	}
	return out, nil
}

func (c *controller) snapshot(s *snapshotMeta) *csi.Snapshot {
	return &csi.Snapshot{
		SnapshotId:     s.ID,
		SourceVolumeId: s.SourceID,
		SizeBytes:      s.Size,
		CreationTime:   timestamppb.New(time.Unix(0, s.Created)),
		ReadyToUse:     true,
	}
}

// CreateSnapshot copies the volume's directory; the snapshot's size is the bytes of the copy
// (`du -sb`), so a VolumeSnapshot's restoreSize is what its data takes (what a quota on
// snapshot storage should count). A restore must ask for at least that, which one of the
// source's size always does.
func (c *controller) CreateSnapshot(_ context.Context, req *csi.CreateSnapshotRequest) (*csi.CreateSnapshotResponse, error) {
	name, source := req.GetName(), req.GetSourceVolumeId()
	if name == "" {
		return nil, status.Error(codes.InvalidArgument, "name missing")
	}
	if source == "" {
		return nil, status.Error(codes.InvalidArgument, "source volume id missing")
	}
	id := idFor("snap-", name)
	c.mu.Lock()
	if s, ok := c.snapshots[id]; ok {
		c.mu.Unlock()
		if s.Name != name || s.SourceID != source {
			return nil, status.Errorf(codes.AlreadyExists, "snapshot %q exists, of volume %q", name, s.SourceID)
		}
		return &csi.CreateSnapshotResponse{Snapshot: c.snapshot(s)}, nil
	}
	if _, ok := c.volumes[source]; !ok {
		c.mu.Unlock()
		return nil, status.Errorf(codes.NotFound, "source volume %q not found", source)
	}
	keys := []string{"snapshot/" + id, "volume/" + source + "/read"}
	if c.busy["snapshot/"+id] > 0 || c.busy["volume/"+source] > 0 {
		c.mu.Unlock()
		return nil, status.Errorf(codes.Aborted, "an operation on snapshot %q or its volume is in progress", name)
	}
	c.hold(keys...)
	c.mu.Unlock()
	defer c.release(keys...)

	dir := c.snapshotDir(id)
	_ = os.RemoveAll(dir)
	if err := copyTree(c.volumeDir(source), dir); err != nil {
		_ = os.RemoveAll(dir)
		return nil, status.Errorf(codes.Internal, "copying volume %s: %v", source, err)
	}
	size, _, err := diskUsage(dir)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, status.Errorf(codes.Internal, "measuring snapshot %s: %v", id, err)
	}
	s := &snapshotMeta{ID: id, Name: name, SourceID: source, Size: size, Parameters: req.GetParameters(),
		Created: time.Now().UnixNano()}
	if err := writeJSON(c.snapshotMetaPath(id), s); err != nil {
		_ = os.RemoveAll(dir)
		return nil, status.Errorf(codes.Internal, "recording snapshot %s: %v", id, err)
	}
	c.mu.Lock()
	c.snapshots[id] = s
	c.mu.Unlock()
	return &csi.CreateSnapshotResponse{Snapshot: c.snapshot(s)}, nil
}

func (c *controller) DeleteSnapshot(_ context.Context, req *csi.DeleteSnapshotRequest) (*csi.DeleteSnapshotResponse, error) {
	return &csi.DeleteSnapshotResponse{}, c.remove("snapshot", req.GetSnapshotId())
}

func (c *controller) ListSnapshots(_ context.Context, req *csi.ListSnapshotsRequest) (*csi.ListSnapshotsResponse, error) {
	c.mu.Lock()
	var all []*snapshotMeta
	for _, s := range c.snapshots {
		if (req.GetSnapshotId() == "" || s.ID == req.GetSnapshotId()) &&
			(req.GetSourceVolumeId() == "" || s.SourceID == req.GetSourceVolumeId()) {
			all = append(all, s)
		}
	}
	c.mu.Unlock()
	sort.Slice(all, func(i, j int) bool { return before(all[i].Created, all[i].ID, all[j].Created, all[j].ID) })
	start, end, next, err := page(req.GetStartingToken(), req.GetMaxEntries(), len(all))
	if err != nil {
		return nil, err
	}
	out := &csi.ListSnapshotsResponse{NextToken: next}
	for _, s := range all[start:end] {
		out.Entries = append(out.Entries, &csi.ListSnapshotsResponse_Entry{Snapshot: c.snapshot(s)})
	}
	return out, nil
}
