package main

// exitCodesHelp is the one exit-code rule every sub-command follows (printed by --help and
// repeated in README.md). Each code was checked against what the sub-command returns: runProxy,
// runBootstrap, runRequest, runWait, runVersion, runHelp and runIstioIptables.
const exitCodesHelp = `
Exit codes (every command):
  0      done: proxy stopped cleanly, wait saw Envoy ready, request got an answer
         (any status below 400, or 404), bootstrap printed or validated, help and version printed
  1      bootstrap --validate found problems (one per line on stderr); istio-iptables: applying
         the capture failed (what it wrote is removed)
  2      usage or configuration error found before anything started (bad flag, argument,
         environment variable, ProxyConfig or file, missing token or root, a setting refused as
         not supported); nothing was started
  255    failed while running, as Istio's agent: request failed or got a status of 400 or more
         (404 excepted), wait timed out, version could not encode, the agent failed
  other  proxy: Envoy exited by itself with this code (Istio's agent exits 0 then);
         istio-iptables: 126 when --run-validation finds no capture
`
