package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/spf13/pflag"

	"github.com/wingman-mesh/wingman/internal/istiolog"
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
	// Istio's wait logs with pkg/log's defaults (only proxy and istio-iptables apply the root
	// log flags: pilot/cmd/pilot-agent/app/cmd.go and wait.go at 1.30.3), so its lines are
	// Istio's default-scope lines on stdout.
	logs, err := istiolog.New(istiolog.Options{}, sio.out, sio.err)
	if err != nil {
		return usageError(sio, "pilot-agent wait", err)
	}
	defer logs.Close()
	log := logs.Logger(istiolog.DefaultScope)
	log.Info(fmt.Sprintf("Waiting for Envoy proxy to be ready (timeout: %d seconds)...", w.timeoutSeconds))
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
			log.Info("Envoy is ready!")
			return 0
		}
		if last == nil || ctx.Err() == nil { // keep the last real answer, not our own deadline
			last = err
			log.Debug("Not ready yet: " + err.Error())
		}
		select {
		case <-ctx.Done():
			// As Istio: cobra prints the error to stderr, main logs it (pilot-agent/main.go).
			msg := fmt.Sprintf("timeout waiting for Envoy proxy to become ready. Last error: %v", last)
			fmt.Fprintf(sio.err, "Error: %s\n", msg)
			log.Error(msg)
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
