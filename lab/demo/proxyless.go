package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	xdscreds "google.golang.org/grpc/credentials/xds"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/xds"

	"github.com/wingman-mesh/wingman/lab/meshlab"
)

// proxyless runs two proxyless gRPC services, alpha and beta, on the gRPC bootstrap the agent
// wrote: their listeners, routes, clusters, endpoints and mTLS settings come from meshlab
// through the agent's xDS socket, and their certificates are the ones the agent wrote to
// OUTPUT_CERTS (file_watcher provider "default"). Each calls the other over mTLS; then the
// route for beta is changed in meshlab's folder and calls to beta follow it to alpha.
//
// grpc-go reads GRPC_XDS_BOOTSTRAP once, when it is initialised; the services here share the
// demo's process, so they are handed the file's contents through grpc-go's explicit
// bootstrap options instead.
func (d *demo) proxyless(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 40*time.Second)
	defer cancel()
	path := filepath.Join(d.root, "etc", "istio", "proxy", "grpc-bootstrap.json")
	bootstrap, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("the agent's gRPC bootstrap: %w", err)
	}
	if !strings.Contains(string(bootstrap), "file_watcher") {
		return "", fmt.Errorf("%s has no file_watcher certificate provider (OUTPUT_CERTS)", path)
	}

	// Clients first (they connect lazily): each service's handler uses them to call the other.
	rb, err := xds.NewXDSResolverWithConfigForTesting(bootstrap)
	if err != nil {
		return "", fmt.Errorf("xDS resolver: %w", err)
	}
	creds, err := xdscreds.NewClientCredentials(xdscreds.ClientOptions{FallbackCreds: insecure.NewCredentials()})
	if err != nil {
		return "", err
	}
	clients := map[string]testgrpc.TestServiceClient{} // by target service; read-only once built
	for _, s := range d.mesh.Services {
		cc, err := grpc.NewClient(d.mesh.target(s), grpc.WithTransportCredentials(creds), grpc.WithResolvers(rb))
		if err != nil {
			return "", fmt.Errorf("client for %s: %w", d.mesh.target(s), err)
		}
		defer cc.Close()
		clients[s.Name] = testgrpc.NewTestServiceClient(cc)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, s := range d.mesh.Services {
		srv, err := d.startService(ctx, &wg, bootstrap, &echo{name: s.Name, clients: clients})
		if err != nil {
			return "", err
		}
		defer srv.Stop()
	}

	var lines []string
	a, b := d.mesh.Services[0], d.mesh.Services[1]
	for _, hop := range [][2]service{{a, b}, {b, a}} {
		var r *testpb.SimpleResponse
		err := d.poll(ctx, 200*time.Millisecond, func() (bool, error) {
			var err error
			r, err = call(ctx, clients[hop[0].Name], hop[1].Name)
			return err == nil, err
		})
		if err != nil {
			return "", fmt.Errorf("%s → %s: %w", hop[0].Name, hop[1].Name, err)
		}
		if r.GetHostname() != hop[0].Name || r.GetServerId() != hop[1].Name || r.GetUsername() != d.spiffeID || r.GetOauthScope() != d.spiffeID {
			return "", fmt.Errorf("%s → %s: called from %q, answered by %q, caller seen as %q, server seen as %q; want %s → %s over mTLS as %s",
				hop[0].Name, hop[1].Name, r.GetHostname(), r.GetServerId(), r.GetUsername(), r.GetOauthScope(), hop[0].Name, hop[1].Name, d.spiffeID)
		}
		lines = append(lines, fmt.Sprintf("%s calls %s: answered by %s over mTLS, each side saw the other as %s",
			hop[0].Name, d.mesh.target(hop[1]), r.GetServerId(), d.spiffeID))
	}

	// Re-route beta to alpha in meshlab's folder; the change reaches the clients through the
	// agent's xDS proxy.
	m := d.mesh
	m.Services = append([]service(nil), d.mesh.Services...)
	m.Services[1].RouteTo = a.Cluster
	if err := writeResources(filepath.Join(d.root, "meshlab", "resources"), m); err != nil {
		return "", err
	}
	start := time.Now()
	err = d.poll(ctx, 100*time.Millisecond, func() (bool, error) {
		r, err := call(ctx, clients[b.Name], "")
		if err != nil {
			return false, err
		}
		if r.GetServerId() != a.Name {
			return false, fmt.Errorf("%s still answered by %s", d.mesh.target(b), r.GetServerId())
		}
		return true, nil
	})
	if err != nil {
		return "", fmt.Errorf("the route change never reached the client: %w", err)
	}
	lines = append(lines, fmt.Sprintf("route for %s changed in meshlab's folder to %s: calls followed it in %v",
		d.mesh.target(b), a.Cluster, time.Since(start).Round(time.Millisecond)))
	var before uint64
	if d.lab != nil {
		before = d.lab.Version()
	}
	if err := writeResources(filepath.Join(d.root, "meshlab", "resources"), d.mesh); err != nil {
		return "", err
	}
	if d.lab != nil { // the next step counts meshlab's loads: let this one land first
		if _, err := d.waitLoad(ctx, func(r meshlab.LoadResult) bool { return r.Version > before }); err != nil {
			return "", fmt.Errorf("meshlab did not reload the restored route: %w", err)
		}
	}
	return "two proxyless gRPC services on the agent's gRPC bootstrap (xds:/// targets, LDS/RDS/CDS/EDS\n" +
		"through the agent's xDS socket, certificates from OUTPUT_CERTS via file_watcher):\n" + strings.Join(lines, "\n"), nil
}

// call makes one RPC through c. With next set, the service that answers calls next and
// relays its answer (a service calling another); otherwise it answers itself.
func call(ctx context.Context, c testgrpc.TestServiceClient, next string) (*testpb.SimpleResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req := &testpb.SimpleRequest{FillServerId: true, FillUsername: true}
	if next != "" {
		req.Payload = &testpb.Payload{Body: []byte(next)}
	}
	return c.UnaryCall(ctx, req)
}

// echo is a demo service. Immutable after construction.
type echo struct {
	testgrpc.UnimplementedTestServiceServer
	name    string
	clients map[string]testgrpc.TestServiceClient // by target service
}

// UnaryCall answers with the service's name and the caller's SPIFFE identity ("" without
// mTLS) or, asked to call another service, calls it and answers with what it saw: the callee's
// answer (ServerId, Username), the callee's identity (OauthScope) and its own name (Hostname).
func (e *echo) UnaryCall(ctx context.Context, req *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	if next := string(req.GetPayload().GetBody()); next != "" {
		c, ok := e.clients[next]
		if !ok {
			return nil, status.Errorf(codes.NotFound, "no service %q", next)
		}
		var p peer.Peer
		r, err := c.UnaryCall(ctx, &testpb.SimpleRequest{FillServerId: true, FillUsername: true}, grpc.Peer(&p))
		if err != nil {
			return nil, err
		}
		r.OauthScope, r.Hostname = spiffeOf(p.AuthInfo), e.name
		return r, nil
	}
	p, _ := peer.FromContext(ctx)
	var auth credentials.AuthInfo
	if p != nil {
		auth = p.AuthInfo
	}
	return &testpb.SimpleResponse{ServerId: e.name, Username: spiffeOf(auth)}, nil
}

func spiffeOf(a credentials.AuthInfo) string {
	if t, ok := a.(credentials.TLSInfo); ok && t.SPIFFEID != nil {
		return t.SPIFFEID.String()
	}
	return ""
}

// startService starts s's xDS-enabled server and waits until it serves (its inbound listener,
// with mTLS, came through the agent).
func (d *demo) startService(ctx context.Context, wg *sync.WaitGroup, bootstrap []byte, e *echo) (*xds.GRPCServer, error) {
	s, ok := d.serviceByName(e.name)
	if !ok {
		return nil, fmt.Errorf("no service %q in the mesh", e.name)
	}
	creds, err := xdscreds.NewServerCredentials(xdscreds.ServerOptions{FallbackCreds: insecure.NewCredentials()})
	if err != nil {
		return nil, err
	}
	serving := make(chan error, 4)
	srv, err := xds.NewGRPCServer(grpc.Creds(creds), xds.BootstrapContentsForTesting(bootstrap),
		xds.ServingModeCallback(func(_ net.Addr, args xds.ServingModeChangeArgs) {
			var err error
			if args.Mode != connectivity.ServingModeServing {
				err = fmt.Errorf("%s not serving: %v", s.Name, args.Err)
			}
			select {
			case serving <- err:
			default:
			}
		}))
	if err != nil {
		return nil, fmt.Errorf("xDS server %s: %w", s.Name, err)
	}
	testgrpc.RegisterTestServiceServer(srv, e)
	lis, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port)))
	if err != nil {
		srv.Stop()
		return nil, err
	}
	wg.Go(func() { _ = srv.Serve(lis) })
	for {
		select {
		case err := <-serving:
			if err == nil {
				return srv, nil
			}
		case <-ctx.Done():
			srv.Stop()
			return nil, fmt.Errorf("%s never got its inbound listener xds.istio.io/grpc/lds/inbound/127.0.0.1:%d: %w", s.Name, s.Port, ctx.Err())
		}
	}
}

// proxylessBuilt says this build has the proxyless gRPC step.
const proxylessBuilt = true

func (d *demo) serviceByName(name string) (service, bool) {
	for _, s := range d.mesh.Services {
		if s.Name == name {
			return s, true
		}
	}
	return service{}, false
}
