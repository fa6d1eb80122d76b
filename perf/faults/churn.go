package faults

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// ChurnResult is what Churn did.
type ChurnResult struct {
	Streams  int64 // streams opened (HEADERS) and reset (RST_STREAM CANCEL)
	Conns    int64 // connections made (more than the workers when the agent closed some)
	GoAways  int64 // GOAWAY frames received
	Refused  int64 // RST_STREAM frames received from the agent
	Duration time.Duration
}

// adsPath is the method Envoy opens for Delta ADS.
const adsPath = "/envoy.service.discovery.v3.AggregatedDiscoveryService/DeltaAggregatedResources"

// Churn opens and immediately resets gRPC streams on the agent's Envoy-facing xDS socket at
// rate per second, spread over conns HTTP/2 connections, for d: an Envoy whose streams come and
// go (and the rapid-reset pattern). It speaks raw HTTP/2 frames so that every open reaches the
// agent as HEADERS and every reset as RST_STREAM, with nothing else on the stream.
func Churn(ctx context.Context, sock string, conns, rate int, d time.Duration) (ChurnResult, error) {
	var res ChurnResult
	var streams, nconns, goaways, refused atomic.Int64
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	t0 := time.Now()
	var wg sync.WaitGroup
	errc := make(chan error, conns)
	perConn := float64(rate) / float64(conns)
	for range conns {
		wg.Go(func() {
			for ctx.Err() == nil {
				nconns.Add(1)
				err := churnConn(ctx, sock, t0, perConn, &streams, &goaways, &refused)
				if err != nil && ctx.Err() == nil && !errors.Is(err, errGoAway) {
					errc <- err
					return
				}
			}
		})
	}
	wg.Wait()
	res = ChurnResult{Streams: streams.Load(), Conns: nconns.Load(), GoAways: goaways.Load(), Refused: refused.Load(), Duration: time.Since(t0)}
	select {
	case err := <-errc:
		return res, err
	default:
		return res, nil
	}
}

var errGoAway = errors.New("GOAWAY from the agent")

// churnConn churns on one connection, keeping its count at perSec since t0 (catching up after
// a slow tick), until ctx ends or the agent closes the connection.
func churnConn(ctx context.Context, sock string, t0 time.Time, perSec float64, streams, goaways, refused *atomic.Int64) error {
	c, err := (&net.Dialer{}).DialContext(ctx, "unix", sock)
	if err != nil {
		return fmt.Errorf("churn: dial %s: %w", sock, err)
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	var wmu sync.Mutex // guards bw and wf
	bw := bufio.NewWriterSize(c, 64<<10)
	wf := http2.NewFramer(bw, nil)
	wmu.Lock()
	_, _ = bw.WriteString(http2.ClientPreface)
	if err = wf.WriteSettings(); err == nil {
		err = bw.Flush()
	}
	wmu.Unlock()
	if err != nil {
		return fmt.Errorf("churn: settings: %w", err)
	}
	readErr := make(chan error, 1)
	go func() {
		rf := http2.NewFramer(io.Discard, c)
		for {
			f, err := rf.ReadFrame()
			if err != nil {
				readErr <- err
				return
			}
			switch f := f.(type) {
			case *http2.SettingsFrame:
				if !f.IsAck() {
					wmu.Lock()
					_ = wf.WriteSettingsAck()
					_ = bw.Flush()
					wmu.Unlock()
				}
			case *http2.PingFrame:
				if !f.IsAck() {
					wmu.Lock()
					_ = wf.WritePing(true, f.Data)
					_ = bw.Flush()
					wmu.Unlock()
				}
			case *http2.GoAwayFrame:
				goaways.Add(1)
				readErr <- errGoAway
				return
			case *http2.RSTStreamFrame:
				refused.Add(1)
			}
		}
	}()
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	enc.SetMaxDynamicTableSizeLimit(0) // every block stands alone
	for _, h := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", adsPath}, {":authority", "localhost"},
		{"content-type", "application/grpc"}, {"te", "trailers"}} {
		_ = enc.WriteField(hpack.HeaderField{Name: h[0], Value: h[1]})
	}
	block := hb.Bytes()
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	id := uint32(1)
	var sent int64
	start := time.Now()
	for {
		select {
		case <-ctx.Done():
			c.Close()
			<-readErr
			return nil
		case err := <-readErr:
			return err
		case <-t.C:
		}
		due := int64(time.Since(start).Seconds()*perSec) - sent
		wmu.Lock()
		for range due {
			if err = wf.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block, EndHeaders: true}); err == nil {
				err = wf.WriteRSTStream(id, http2.ErrCodeCancel)
			}
			if err != nil {
				break
			}
			sent++
			streams.Add(1)
			id += 2
		}
		if err == nil {
			err = bw.Flush()
		}
		wmu.Unlock()
		if err != nil {
			c.Close()
			if rerr := <-readErr; errors.Is(rerr, errGoAway) {
				return rerr
			}
			return fmt.Errorf("churn: write: %w", err)
		}
	}
}
