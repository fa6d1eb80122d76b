package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/spf13/pflag"
)

type waitFlags struct {
	timeoutSeconds, requestTimeoutMillis, periodMillis int
	url                                                string
}

func waitFlagSet() (*pflag.FlagSet, *waitFlags) {
	fs, _ := newRootFlagSet("wait")
	w := &waitFlags{}
	fs.IntVar(&w.timeoutSeconds, "timeoutSeconds", 60, "maximum number of seconds to wait for Envoy to be ready")
	fs.IntVar(&w.requestTimeoutMillis, "requestTimeoutMillis", 500, "number of milliseconds to wait for response")
	fs.IntVar(&w.periodMillis, "periodMillis", 500, "number of milliseconds to wait between attempts")
	fs.StringVar(&w.url, "url", "http://localhost:15021/healthz/ready", "URL to use in requests")
	return fs, w
}

// runWait is `pilot-agent wait`: poll the URL until it answers 200 (the postStart hook used with
// holdApplicationUntilProxyStarts).
func runWait(ctx context.Context, args []string, sio stdio) int {
	fs, w := waitFlagSet()
	if err := fs.Parse(args); err != nil {
		if isHelp(err) {
			commandUsage(sio.out, "wait", "Waits until the Envoy proxy is ready", fs)
			return 0
		}
		return usageError(sio, "pilot-agent wait", err)
	}
	if fs.NArg() > 0 {
		return usageError(sio, "pilot-agent wait", fmt.Errorf("unexpected argument %q", fs.Arg(0)))
	}
	if w.timeoutSeconds <= 0 || w.requestTimeoutMillis <= 0 || w.periodMillis <= 0 {
		return usageError(sio, "pilot-agent wait", fmt.Errorf("--timeoutSeconds, --requestTimeoutMillis and --periodMillis must be positive"))
	}
	fmt.Fprintf(sio.out, "Waiting for Envoy proxy to be ready (timeout: %d seconds)...\n", w.timeoutSeconds)
	ctx, cancel := context.WithTimeout(ctx, time.Duration(w.timeoutSeconds)*time.Second)
	defer cancel()
	tr := &http.Transport{Proxy: nil, DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: time.Duration(w.requestTimeoutMillis) * time.Millisecond}
	period := time.NewTicker(time.Duration(w.periodMillis) * time.Millisecond)
	defer period.Stop()
	var last error
	for {
		err := probe(ctx, client, w.url)
		if err == nil {
			fmt.Fprintln(sio.out, "Envoy is ready!")
			return 0
		}
		if last == nil || ctx.Err() == nil { // keep the last real answer, not our own deadline
			last = err
		}
		select {
		case <-ctx.Done():
			fmt.Fprintf(sio.err, "Error: timeout waiting for Envoy proxy to become ready. Last error: %v\n", last)
			return exitFailure
		case <-period.C:
		}
	}
}

func probe(ctx context.Context, client *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP status code %d", resp.StatusCode)
	}
	return nil
}
