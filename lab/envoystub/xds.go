package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"
	"time"

	_ "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"  // decodes CDS resources
	_ "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3" // decodes EDS resources
	_ "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3" // decodes LDS resources
	_ "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"    // decodes RDS resources
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

const (
	clusterType  = resourcev3.ClusterType
	listenerType = resourcev3.ListenerType
	maxMsg       = 256 << 20
)

// xdsClient is the ADS side. Immutable after creation except through st.
type xdsClient struct {
	bs         *bootstrap
	ev         *events
	st         *state
	nackPrefix string
	slow       time.Duration
	direct     string
	stall      time.Duration
	stallUntil atomic.Int64  // Unix nanoseconds before which ADS responses are not read
	hold       chan struct{} // nil, or closed on release: until then no ADS response is answered
}

// releases closes x.hold on the first signal (later ones are ignored) until ctx is done.
func (x *xdsClient) releases(ctx context.Context, sig <-chan os.Signal) {
	select {
	case <-ctx.Done():
	case <-sig:
		close(x.hold)
	}
}

// held waits, when answers are held, until they are released: the response of type typeURL at
// version has been reported and is not ACKed (or NACKed) yet, as by an Envoy still applying a
// large configuration. Reported as "hold" and "release" events.
func (x *xdsClient) held(ctx context.Context, typeURL, version string) {
	if x.hold == nil {
		return
	}
	select {
	case <-x.hold:
		return
	default:
	}
	x.ev.emit(event{Ev: "hold", Type: typeURL, Version: version})
	select {
	case <-ctx.Done():
	case <-x.hold:
		x.ev.emit(event{Ev: "release", Type: typeURL, Version: version})
	}
}

// stalls starts a stall of x.stall on every signal until ctx is done.
func (x *xdsClient) stalls(ctx context.Context, sig <-chan os.Signal) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-sig:
			now := time.Now()
			x.stallUntil.Store(now.Add(x.stall).UnixNano())
			x.ev.emit(event{Ev: "stall", T: now.UnixNano()})
		}
	}
}

func dialPipe(path string) (*grpc.ClientConn, error) {
	return grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMsg), grpc.MaxCallSendMsgSize(maxMsg)),
		grpc.WithInitialWindowSize(1<<20), grpc.WithInitialConnWindowSize(4<<20))
}

// run keeps one ADS stream open, reconnecting as Envoy does, until ctx is done.
func (x *xdsClient) run(ctx context.Context) error {
	target := "unix://" + x.bs.xdsPipe
	if x.direct != "" {
		target = "passthrough:///" + x.direct
	}
	cc, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMsg), grpc.MaxCallSendMsgSize(maxMsg)),
		grpc.WithInitialWindowSize(1<<20), grpc.WithInitialConnWindowSize(4<<20))
	if err != nil {
		return fmt.Errorf("ads dial %s: %w", target, err)
	}
	defer cc.Close()
	client := discovery.NewAggregatedDiscoveryServiceClient(cc)
	for ctx.Err() == nil {
		var err error
		if x.bs.apiType == "DELTA_GRPC" {
			err = x.delta(ctx, client)
		} else {
			err = x.sotw(ctx, client)
		}
		if ctx.Err() != nil {
			break
		}
		x.ev.emit(event{Ev: "ads_error", Err: err.Error()})
		select { // Envoy's reconnect backoff starts near 500ms; a short fixed pause will do here
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
	return nil
}

// decode unmarshals every resource as Envoy does; unknown types are only counted.
func decode(res []*anypb.Any) error {
	for _, a := range res {
		m, err := a.UnmarshalNew()
		if err != nil {
			if strings.Contains(err.Error(), "not found") {
				continue
			}
			return fmt.Errorf("resource of type %s: %w", a.GetTypeUrl(), err)
		}
		_ = m
	}
	return nil
}

func (x *xdsClient) pause(ctx context.Context) {
	if until := time.Unix(0, x.stallUntil.Load()); time.Now().Before(until) {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(until)):
		}
		x.ev.emit(event{Ev: "unstall"})
	}
	if x.slow <= 0 {
		return
	}
	select {
	case <-ctx.Done():
	case <-time.After(x.slow):
	}
}

func (x *xdsClient) count(typeURL string, ok bool) {
	switch {
	case typeURL == clusterType && ok:
		x.st.cdsOK.Add(1)
	case typeURL == clusterType:
		x.st.cdsRejected.Add(1)
	case typeURL == listenerType && ok:
		x.st.ldsOK.Add(1)
	case typeURL == listenerType:
		x.st.ldsRejected.Add(1)
	}
}

func (x *xdsClient) nack(version string, err error) *status.Status {
	if err != nil {
		return &status.Status{Code: int32(codes.InvalidArgument), Message: err.Error()}
	}
	if x.nackPrefix != "" && strings.HasPrefix(version, x.nackPrefix) {
		return &status.Status{Code: int32(codes.InvalidArgument), Message: "rejected by request: version " + version}
	}
	return nil
}

func (x *xdsClient) sotw(ctx context.Context, c discovery.AggregatedDiscoveryServiceClient) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s, err := c.StreamAggregatedResources(ctx)
	if err != nil {
		return fmt.Errorf("open SotW ADS: %w", err)
	}
	accepted := map[string]string{}
	if err := s.Send(&discovery.DiscoveryRequest{Node: x.bs.node, TypeUrl: clusterType}); err != nil {
		return fmt.Errorf("send CDS request: %w", err)
	}
	ldsSent := false
	for {
		x.pause(ctx)
		resp, err := s.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return errors.New("ADS stream closed by the agent")
			}
			return fmt.Errorf("ADS receive: %w", err)
		}
		t := time.Now().UnixNano()
		nack := x.nack(resp.VersionInfo, decode(resp.Resources))
		x.count(resp.TypeUrl, nack == nil)
		ev := event{Ev: "push", Api: "sotw", Type: resp.TypeUrl, Version: resp.VersionInfo,
			Bytes: proto.Size(resp), N: len(resp.Resources), T: t}
		req := &discovery.DiscoveryRequest{TypeUrl: resp.TypeUrl, ResponseNonce: resp.Nonce}
		if nack != nil {
			ev.Ev = "nack"
			req.VersionInfo, req.ErrorDetail = accepted[resp.TypeUrl], nack
		} else {
			accepted[resp.TypeUrl] = resp.VersionInfo
			req.VersionInfo = resp.VersionInfo
		}
		x.ev.emit(ev)
		x.held(ctx, resp.TypeUrl, ev.Version)
		if err := s.Send(req); err != nil {
			return fmt.Errorf("send ACK for %s: %w", resp.TypeUrl, err)
		}
		if !ldsSent && resp.TypeUrl == clusterType {
			ldsSent = true
			if err := s.Send(&discovery.DiscoveryRequest{TypeUrl: listenerType}); err != nil {
				return fmt.Errorf("send LDS request: %w", err)
			}
		}
	}
}

func (x *xdsClient) delta(ctx context.Context, c discovery.AggregatedDiscoveryServiceClient) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s, err := c.DeltaAggregatedResources(ctx)
	if err != nil {
		return fmt.Errorf("open Delta ADS: %w", err)
	}
	if err := s.Send(&discovery.DeltaDiscoveryRequest{Node: x.bs.node, TypeUrl: clusterType}); err != nil {
		return fmt.Errorf("send CDS request: %w", err)
	}
	known := map[string]map[string]struct{}{}
	ldsSent := false
	for {
		x.pause(ctx)
		resp, err := s.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return errors.New("ADS stream closed by the agent")
			}
			return fmt.Errorf("ADS receive: %w", err)
		}
		t := time.Now().UnixNano()
		anys := make([]*anypb.Any, 0, len(resp.Resources))
		for _, r := range resp.Resources {
			if r.Resource != nil {
				anys = append(anys, r.Resource)
			}
		}
		nack := x.nack(resp.SystemVersionInfo, decode(anys))
		x.count(resp.TypeUrl, nack == nil)
		ev := event{Ev: "push", Api: "delta", Type: resp.TypeUrl, Version: resp.SystemVersionInfo,
			Bytes: proto.Size(resp), T: t}
		req := &discovery.DeltaDiscoveryRequest{TypeUrl: resp.TypeUrl, ResponseNonce: resp.Nonce}
		if nack != nil {
			ev.Ev = "nack"
			req.ErrorDetail = nack
		} else {
			k := known[resp.TypeUrl]
			if k == nil {
				k = map[string]struct{}{}
				known[resp.TypeUrl] = k
			}
			for _, r := range resp.Resources {
				k[r.Name] = struct{}{}
			}
			for _, n := range resp.RemovedResources {
				delete(k, n)
			}
		}
		ev.N = len(known[resp.TypeUrl])
		x.ev.emit(ev)
		x.held(ctx, resp.TypeUrl, ev.Version)
		if err := s.Send(req); err != nil {
			return fmt.Errorf("send ACK for %s: %w", resp.TypeUrl, err)
		}
		if !ldsSent && resp.TypeUrl == clusterType {
			ldsSent = true
			if err := s.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: listenerType}); err != nil {
				return fmt.Errorf("send LDS request: %w", err)
			}
		}
	}
}
