// The test environment's CSI driver (scripts/k8s-testenv; not part of sbx): a volume is a
// directory on this host, a snapshot a copy of one, a volume from a snapshot or a clone of a
// volume a copy back; the node service publishes a volume by bind-mounting its directory
// onto the target path. It stands in for Longhorn behind StorageClass and VolumeSnapshotClass
// `longhorn` of the test cluster, with the real Kubernetes CSI sidecars around it.
//
// Usage:
//
//	csi-driver controller --endpoint SOCKET --state-dir DIR
//	csi-driver node --endpoint SOCKET --state-dir DIR --node-id NODE [--registration SOCKET]
//	csi-driver all --endpoint SOCKET --state-dir DIR --node-id NODE   (both, for csi-sanity)
//	csi-driver probe --endpoint SOCKET                                (exit 0 when it is ready)
//
// State (DIR): volumes/<id>/ and snapshots/<id>/ hold the data, meta/volumes/<id>.json and
// meta/snapshots/<id>.json what the controller knows of them. The node service needs only
// volumes/<id>/ (and reads the capacity from the metadata for NodeGetVolumeStats).
//
// One injected fault (documented in scripts/k8s-testenv and docs/testing.md): CreateVolume
// from a snapshot that was taken for a VolumeSnapshot named `never-binds` (the name the
// csi-snapshotter passes with --extra-create-metadata) fails with RESOURCE_EXHAUSTED, every
// time, so that its PVC stays Pending forever.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// DriverName is the CSI driver's name: the StorageClass's provisioner, the
// VolumeSnapshotClass's driver, the CSIDriver object's name.
const DriverName = "csi.testenv.sbx.io"

// Version is the driver's vendor version.
const Version = "0.1.0"

func usage() {
	fmt.Fprintln(os.Stderr, "usage: csi-driver controller|node|all|probe --endpoint SOCKET [--state-dir DIR] [--node-id NODE] [--registration SOCKET]")
	os.Exit(2)
}

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	mode := os.Args[1]
	fs := flag.NewFlagSet(mode, flag.ExitOnError)
	endpoint := fs.String("endpoint", "", "the CSI socket to serve (a path or unix://PATH)")
	stateDir := fs.String("state-dir", "", "where volumes, snapshots and their metadata live")
	nodeID := fs.String("node-id", "", "the node's id (NodeGetInfo): the Kubernetes node name")
	registration := fs.String("registration", "", "node: the kubelet plugin-registration socket to serve (in the kubelet's plugins_registry)")
	kubeletEndpoint := fs.String("kubelet-endpoint", "", "node: the CSI socket as the kubelet reaches it (default --endpoint)")
	_ = fs.Parse(os.Args[2:])
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	log.SetPrefix("csi-driver " + mode + ": ")
	sock := strings.TrimPrefix(*endpoint, "unix://")
	if sock == "" {
		usage()
	}
	if mode == "probe" {
		os.Exit(probe(sock))
	}
	if *stateDir == "" {
		usage()
	}
	var controller, node bool
	switch mode {
	case "controller":
		controller = true
	case "node":
		node = true
	case "all":
		controller, node = true, true
	default:
		usage()
	}
	if node && *nodeID == "" {
		log.Fatal("--node-id is needed for the node service")
	}

	server := grpc.NewServer(grpc.UnaryInterceptor(logCalls))
	csi.RegisterIdentityServer(server, &identity{controller: controller})
	if controller {
		c, err := newController(*stateDir)
		if err != nil {
			log.Fatal(err)
		}
		csi.RegisterControllerServer(server, c)
	}
	if node {
		n, err := newNode(*stateDir, *nodeID)
		if err != nil {
			log.Fatal(err)
		}
		csi.RegisterNodeServer(server, n)
	}
	lis, err := listen(sock)
	if err != nil {
		log.Fatal(err)
	}
	go func() {
		if err := server.Serve(lis); err != nil {
			log.Fatalf("serving %s: %v", sock, err)
		}
	}()
	log.Printf("%s %s serving %s (state %s)", DriverName, Version, sock, *stateDir)

	var reg *grpc.Server
	if *registration != "" {
		if !node {
			log.Fatal("--registration is for the node service")
		}
		advertised := *kubeletEndpoint
		if advertised == "" {
			advertised = sock
		}
		reg = grpc.NewServer(grpc.UnaryInterceptor(logCalls))
		registerapi.RegisterRegistrationServer(reg, &registrar{endpoint: advertised})
		rl, err := listen(*registration)
		if err != nil {
			log.Fatal(err)
		}
		go func() {
			if err := reg.Serve(rl); err != nil {
				log.Fatalf("serving %s: %v", *registration, err)
			}
		}()
		log.Printf("kubelet plugin registration on %s (endpoint %s)", *registration, advertised)
	}

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	if reg != nil {
		reg.Stop()
		_ = os.Remove(*registration)
	}
	server.Stop()
	_ = os.Remove(sock)
}

// listen on a Unix socket, replacing a stale socket file.
func listen(path string) (net.Listener, error) {
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		return nil, fmt.Errorf("removing the old socket %s: %w", path, err)
	}
	return net.Listen("unix", path)
}

// probe: 0 when the driver at sock answers GetPluginInfo and Probe says ready.
func probe(sock string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer conn.Close()
	id := csi.NewIdentityClient(conn)
	info, err := id.GetPluginInfo(ctx, &csi.GetPluginInfoRequest{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	p, err := id.Probe(ctx, &csi.ProbeRequest{})
	if err != nil || (p.GetReady() != nil && !p.GetReady().GetValue()) {
		fmt.Fprintln(os.Stderr, "not ready", err)
		return 1
	}
	fmt.Println(info.GetName(), info.GetVendorVersion())
	return 0
}

// logCalls logs every call that changes something, and every error.
func logCalls(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	started := time.Now()
	resp, err := handler(ctx, req)
	method := info.FullMethod[strings.LastIndex(info.FullMethod, "/")+1:]
	quiet := strings.HasPrefix(method, "Get") || strings.HasPrefix(method, "List") ||
		method == "Probe" || strings.HasSuffix(method, "GetCapabilities") || method == "NodeGetInfo" ||
		method == "NodeGetVolumeStats"
	if err != nil {
		log.Printf("%s %s: %v (%s)", method, brief(req), err, time.Since(started).Round(time.Millisecond))
	} else if !quiet {
		log.Printf("%s %s: ok (%s)", method, brief(req), time.Since(started).Round(time.Millisecond))
	}
	return resp, err
}

// brief: a request without its secrets, on one line.
func brief(req any) string {
	s := fmt.Sprintf("%v", req)
	if i := strings.Index(s, "secrets:"); i >= 0 {
		s = s[:i] + "secrets:<hidden>"
	}
	return s
}

type identity struct {
	csi.UnimplementedIdentityServer
	controller bool
}

func (i *identity) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: DriverName, VendorVersion: Version}, nil
}

func (i *identity) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	var caps []*csi.PluginCapability
	if i.controller {
		caps = append(caps, &csi.PluginCapability{Type: &csi.PluginCapability_Service_{
			Service: &csi.PluginCapability_Service{Type: csi.PluginCapability_Service_CONTROLLER_SERVICE},
		}})
	}
	return &csi.GetPluginCapabilitiesResponse{Capabilities: caps}, nil
}

func (i *identity) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	return &csi.ProbeResponse{}, nil
}

// registrar is the kubelet's plugin-registration service, as node-driver-registrar provides it.
type registrar struct {
	registerapi.UnimplementedRegistrationServer
	endpoint string
}

func (r *registrar) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return &registerapi.PluginInfo{
		Type:              registerapi.CSIPlugin,
		Name:              DriverName,
		Endpoint:          r.endpoint,
		SupportedVersions: []string{"1.0.0"},
	}, nil
}

func (r *registrar) NotifyRegistrationStatus(_ context.Context, s *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	if s.PluginRegistered {
		log.Printf("registered with the kubelet")
	} else {
		log.Printf("the kubelet did not register the plugin: %s", s.Error)
	}
	return &registerapi.RegistrationStatusResponse{}, nil
}
