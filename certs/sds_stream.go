package certs

import (
	"context"
	"errors"
	"io"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/wingman-mesh/wingman/fastpath"
)

// sdsConn is one SDS stream as encoded DiscoveryRequests in and DiscoveryResponses out.
type sdsConn interface {
	Context() context.Context
	// Recv returns the next encoded DiscoveryRequest; the caller frees it.
	Recv() (fastpath.Frame, error)
	// Send sends an encoded DiscoveryResponse; resp must not be modified afterwards.
	Send(resp []byte) error
}

var _ sdsConn = h2SDSConn{}

// sdsStream is the state of one StreamSecrets call. Owned by the handler goroutine.
type sdsStream struct {
	s       *Server
	stream  sdsConn
	started bool                // a request with a node has been seen
	names   map[string]struct{} // subscribed resource names
	sent    map[string]uint64   // generation last sent per name
	nonce   string              // nonce of the last response
	buf     [][]byte            // reused response resources
}

// streamSecrets serves one Envoy SDS stream with Istio's request semantics. A rotation wakes every
// stream through its own capacity-1 channel and each stream sends on its own goroutine, so pushes
// go out concurrently and a slow stream delays nobody but itself.
func (s *Server) streamSecrets(stream sdsConn) error {
	ctx := stream.Context()
	reqs := make(chan *sdsRequest)
	recvErr := make(chan error, 1)
	s.streams.Add(1)
	go func() { // owned by Run through s.streams; ends with the stream's context
		defer s.streams.Done()
		var p fastpath.Peeker
		for {
			f, err := stream.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			req := &sdsRequest{}
			err = readRequest(&p, f.Data, req)
			f.Free()
			if err != nil {
				// What gRPC's proto codec answers a request it cannot unmarshal.
				recvErr <- status.Errorf(codes.Internal, "grpc: error unmarshalling request: %v", err)
				return
			}
			select {
			case reqs <- req:
			case <-ctx.Done():
				return
			}
		}
	}()
	wake := make(chan struct{}, 1)
	cancel := s.src.watch(wake)
	defer cancel()
	st := &sdsStream{s: s, stream: stream, names: map[string]struct{}{}, sent: map[string]uint64{}}
	for {
		var err error
		select {
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		case err = <-recvErr:
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		case req := <-reqs:
			err = st.handle(req)
		case <-wake:
			err = st.push(nil, false)
		}
		if err != nil {
			s.log.Debug("SDS stream ended", "err", err)
			return err
		}
	}
}

func (st *sdsStream) handle(req *sdsRequest) error {
	if !st.started {
		if req.TypeURL == fastpath.HealthInfoType {
			return nil
		}
		if req.NodeID == "" {
			return status.Error(codes.InvalidArgument, "SDS: the first request carries no node id")
		}
		st.started = true
	}
	if req.TypeURL != fastpath.SecretType {
		return status.Errorf(codes.InvalidArgument, "SDS: type %q is not %s", req.TypeURL, fastpath.SecretType)
	}
	for _, n := range req.names {
		if err := checkResourceName(n); err != nil {
			return status.Error(codes.InvalidArgument, "SDS: "+err.Error())
		}
	}
	if req.HasError {
		st.s.met.sdsRejects.Inc()
		st.s.log.Warn("SDS response rejected by Envoy", "nonce", req.Nonce,
			"resources", req.names, "error", req.ErrorMsg)
		return nil
	}
	nonce := req.Nonce
	if nonce != "" && nonce != st.nonce {
		return nil // stale: a response is in flight that this request did not see
	}
	var added []string
	next := make(map[string]struct{}, len(req.names))
	for _, n := range req.names {
		next[n] = struct{}{}
		if _, had := st.names[n]; !had || nonce == "" {
			added = append(added, n)
		}
	}
	for n := range st.names {
		if _, keep := next[n]; !keep {
			delete(st.sent, n)
		}
	}
	st.names = next
	if len(added) == 0 {
		return nil
	}
	return st.push(added, true)
}

// checkResourceName rejects names no SDS server could serve.
func checkResourceName(n string) error {
	switch {
	case n == "":
		return errors.New("empty resource name")
	case strings.HasPrefix(n, fileCertPrefix) || strings.HasPrefix(n, fileRootPrefix):
		_, err := parseFileResource(n, n)
		if err != nil && n != fileRootSystem {
			return err
		}
	}
	return nil
}

// push sends, in one response, the named secrets (all subscribed ones when names is nil) that are
// available and, unless force, newer than what this stream last received.
func (st *sdsStream) push(names []string, force bool) error {
	res := st.buf[:0]
	add := func(n string) error {
		v, err := st.s.src.secret(n)
		if err != nil {
			return status.Error(codes.Unavailable, "SDS: "+err.Error())
		}
		if v == nil || (!force && v.gen <= st.sent[n]) {
			return nil
		}
		res = append(res, v.resource())
		st.sent[n] = v.gen
		return nil
	}
	if names == nil {
		for n := range st.names {
			if err := add(n); err != nil {
				return err
			}
		}
	} else {
		for _, n := range names {
			if err := add(n); err != nil {
				return err
			}
		}
	}
	st.buf = res
	if len(res) == 0 {
		return nil
	}
	id := st.s.next()
	resp := encodeResponse(st.s.clock.Now(), id, res)
	st.nonce = id
	clear(res)
	return st.stream.Send(resp)
}
