package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// allowedDebugPorts are the ports `request` may call (Istio: admin, status, Envoy health, and
// the former debug port).
var allowedDebugPorts = []int{15000, 15020, 15021, 15004}

func requestFlagSet() (*pflag.FlagSet, *int) {
	fs, _ := newRootFlagSet("request")
	port := fs.Int("debug-port", 15000, "set the port to make a local request to; one of 15000, 15020, 15021, 15004")
	return fs, port
}

// runRequest is `pilot-agent request <method> <path> [<body>]`: an HTTP request to localhost on
// the debug port, printing the body. Status > 399 fails, except 404 (pilot/pkg/request).
func runRequest(ctx context.Context, args []string, sio stdio) int {
	fs, port := requestFlagSet()
	if err := fs.Parse(args); err != nil {
		if isHelp(err) {
			commandUsage(sio.out, "request <method> <path> [<body>]", "Makes an HTTP request to Envoy's admin API", fs)
			return 0
		}
		return usageError(sio, "pilot-agent request", err)
	}
	if fs.NArg() < 2 || fs.NArg() > 3 {
		return usageError(sio, "pilot-agent request", fmt.Errorf("accepts between 2 and 3 arg(s), received %d", fs.NArg()))
	}
	allowed := false
	for _, p := range allowedDebugPorts {
		allowed = allowed || p == *port
	}
	if !allowed {
		return usageError(sio, "pilot-agent request", fmt.Errorf("invalid debug port %d (allowed: 15000, 15020, 15021, 15004)", *port))
	}
	body := ""
	if fs.NArg() == 3 {
		body = fs.Arg(2)
	}
	out, err := doRequest(ctx, "localhost:"+strconv.Itoa(*port), fs.Arg(0), fs.Arg(1), body)
	if err != nil {
		fmt.Fprintf(sio.err, "Error: %v\n", err)
		return exitFailure
	}
	fmt.Fprintln(sio.out, out)
	return 0
}

func doRequest(ctx context.Context, addr, method, path, body string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	url := "http://" + addr + "/" + strings.TrimPrefix(path, "/")
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		return "", fmt.Errorf("building request %s %s: %w", method, url, err)
	}
	tr := &http.Transport{Proxy: nil, DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", fmt.Errorf("%s %s: reading body: %w", method, url, err)
	}
	if resp.StatusCode > 399 && resp.StatusCode != http.StatusNotFound {
		return "", errors.New("received unsuccessful status code " + strconv.Itoa(resp.StatusCode) + ": " + string(b))
	}
	return string(b), nil
}
