package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/wingman-mesh/wingman/bootstrap"
	"github.com/wingman-mesh/wingman/cmd/pilot-agent/options"
	"github.com/wingman-mesh/wingman/meshconfig/meshapi"
)

// checkConfigFiles checks, before anything starts, that the files Envoy's bootstrap comes from
// can be read: the ProxyConfig's customConfigFile, or else the custom bootstrap template
// (ISTIO_BOOTSTRAP, --templateFile, proxyBootstrapTemplatePath). The bootstrap is rendered
// concurrently with the other parts' start, so a missing template used to show up only after
// the status and SDS servers had started, as exit 255 instead of a configuration error (2).
// The mesh config file is read (and refused) by resolveProxyConfig already;
// ISTIO_BOOTSTRAP_OVERRIDE stays a warning, as in Istio (pkg/envoy/proxy.go).
func checkConfigFiles(templateFlag string, env *options.Env, pc *meshapi.ProxyConfig) error {
	if env.DisableEnvoy {
		return nil
	}
	if f := pc.GetCustomConfigFile(); f != "" {
		return readableFile("customConfigFile", f)
	}
	tmpl := bootstrap.EffectiveTemplatePath(env.BootstrapTemplate, templateFlag, pc)
	if tmpl == "" {
		return nil
	}
	if bootstrap.IsDefaultTemplate(tmpl) {
		if _, err := os.Stat(tmpl); errors.Is(err, fs.ErrNotExist) {
			return nil // no template in the image at Istio's path: the typed render (RenderEffective)
		}
	}
	setting := "proxyBootstrapTemplatePath" // the precedence of EffectiveTemplatePath
	switch {
	case env.BootstrapTemplate != "":
		setting = "ISTIO_BOOTSTRAP"
	case templateFlag != "":
		setting = "--templateFile"
	}
	return readableFile(setting, tmpl)
}

// readableFile reports why path, named by setting, is not a file the agent can read.
func readableFile(setting, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("%s: %w", setting, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("%s: %w", setting, err)
	}
	if st.IsDir() {
		return fmt.Errorf("%s: %s is a directory, not a file", setting, path)
	}
	return nil
}
