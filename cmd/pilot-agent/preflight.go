package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/wingman-mesh/wingman/certs"
	"github.com/wingman-mesh/wingman/cmd/pilot-agent/options"
)

// Paths Istio's agent reads, relative to the working directory ("/" in the proxyv2 image).
const (
	tokenPath         = "./var/run/secrets/tokens/istio-token"
	istiodRootPath    = "./var/run/secrets/istio/root-cert.pem"
	customRootPath    = "./etc/certs/root-cert.pem"
	bootstrapFileName = "envoy-rev.json"
)

// preflight checks, before anything starts, the files start-up cannot do without: the root
// certificate that verifies istiod (Istio's FindRootCAForXDS order; a missing file is fatal in
// Istio too, only later) and the service-account token the CA needs when no other credential is
// configured.
func preflight(s proxySettings, env *options.Env) error {
	var errs []error
	if s.ControlPlaneAuthPolicy != "NONE" {
		if root, err := xdsRootPath(env); err != nil {
			errs = append(errs, err)
		} else if root != "" {
			if _, err := os.Stat(root); err != nil {
				errs = append(errs, fmt.Errorf("root certificate for istiod: %w", err))
			}
		}
	}
	if !env.FileMountedCerts && env.ProvCert == "" && env.CredentialFetcherType == "JWT" &&
		env.CAProvider == "Citadel" && env.PilotCertProvider != "none" {
		if _, err := os.Stat(tokenPath); err != nil {
			errs = append(errs, fmt.Errorf("service account token for the CA (FILE_MOUNTED_CERTS and PROV_CERT unset): %w", err))
		}
	}
	if err := caRootError(env); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, identityErrors(env)...)
	if f := env.WorkloadIdentitySocketFile; f != defaultSDSSocketFile {
		// As Istio's agent: it serves its own SDS only on the default name; another name must
		// belong to a live SDS server (SPIRE), else the start fails.
		path := filepath.Join(sdsSocketDir, f)
		if live, _ := certs.ProbeSDSSocket(path, time.Second); !live {
			errs = append(errs, fmt.Errorf("WORKLOAD_IDENTITY_SOCKET_FILE=%s: no SDS server answers at %s "+
				"(the agent serves SDS itself only on the default name %q)", f, path, defaultSDSSocketFile))
		}
	}
	return errors.Join(errs...)
}

// defaultSDSSocketFile is Istio's default WORKLOAD_IDENTITY_SOCKET_FILE.
const defaultSDSSocketFile = "socket"

// caRootError is Istio's FindRootCAForCA refusal: with PILOT_CERT_PROVIDER=none there is no root
// to verify the CA with unless CA_ROOT_CA or PROV_CERT names one (file-mounted certificates need
// no CA).
func caRootError(env *options.Env) error {
	if env.FileMountedCerts || env.PilotCertProvider != "none" || env.CARootCA != "" || env.ProvCert != "" {
		return nil
	}
	return errors.New("PILOT_CERT_PROVIDER=none leaves no root certificate to verify the CA with (set CA_ROOT_CA)")
}

// identityErrors names the empty variables a certificate request needs (every mode but
// FILE_MOUNTED_CERTS asks the CA for spiffe://<TRUST_DOMAIN>/ns/<POD_NAMESPACE>/sa/<SERVICE_ACCOUNT>,
// which the CA checks against the service-account token).
func identityErrors(env *options.Env) []error {
	if env.FileMountedCerts {
		return nil
	}
	var errs []error
	for _, v := range []struct{ name, value string }{
		{"POD_NAMESPACE", env.PodNamespace}, {"SERVICE_ACCOUNT", env.ServiceAccount},
	} {
		if v.value == "" {
			errs = append(errs, fmt.Errorf("%s is empty: the workload certificate is requested for "+
				"spiffe://%s/ns/<POD_NAMESPACE>/sa/<SERVICE_ACCOUNT>, which the CA checks against the "+
				"service-account token %s (the injector sets %s from the pod; set FILE_MOUNTED_CERTS=true "+
				"to use mounted certificates instead)", v.name, env.TrustDomain, tokenPath, v.name))
		}
	}
	return errs
}

// xdsRootPath returns the root certificate file istiod is verified with ("" for the system pool).
func xdsRootPath(env *options.Env) (string, error) {
	switch {
	case env.XDSRootCA == "SYSTEM":
		return "", nil
	case env.XDSRootCA != "":
		return env.XDSRootCA, nil
	}
	if _, err := os.Stat(customRootPath); err == nil {
		return customRootPath, nil
	}
	switch {
	case env.ProvCert != "":
		return filepath.Join(env.ProvCert, "root-cert.pem"), nil
	case env.FileMountedCerts && env.TLSClientRootCert != "":
		return env.TLSClientRootCert, nil
	case env.PilotCertProvider == "none":
		return "", errors.New("PILOT_CERT_PROVIDER=none leaves no root certificate to verify istiod with " +
			"(set XDS_ROOT_CA or controlPlaneAuthPolicy: NONE)")
	}
	return istiodRootPath, nil
}
