package cache

import (
	"context"
	"fmt"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/wingman-mesh/wingman/fastpath"
)

// Field numbers of the Envoy messages the rewrite reads and writes on the wire (from
// envoy/extensions/wasm/v3/wasm.proto, config/core/v3/base.proto and http_uri.proto, as
// go-control-plane's generated code declares them; rewrite_test.go decodes every result with it):
const (
	wasmConfig       = 1 // {http,network}.wasm.v3.Wasm.config (PluginConfig)
	pluginName       = 1 // PluginConfig.name
	pluginVM         = 3 // PluginConfig.vm_config (VmConfig)
	pluginFailOpen   = 5 // PluginConfig.fail_open
	pluginPolicy     = 7 // PluginConfig.failure_policy
	vmCode           = 3 // VmConfig.code (AsyncDataSource)
	vmEnv            = 7 // VmConfig.environment_variables (EnvironmentVariables)
	codeLocal        = 1 // AsyncDataSource.local (DataSource)
	codeRemote       = 2 // AsyncDataSource.remote (RemoteDataSource)
	dataFilename     = 1 // DataSource.filename
	remoteHTTPURI    = 1 // RemoteDataSource.http_uri (HttpUri)
	remoteSHA256     = 2 // RemoteDataSource.sha256
	uriURI           = 1 // HttpUri.uri
	uriTimeout       = 3 // HttpUri.timeout (Duration: seconds 1, nanos 2)
	envHostKeys      = 1 // EnvironmentVariables.host_env_keys
	envKeyValues     = 2 // EnvironmentVariables.key_values (map entries: key 1, value 2)
	policyFailOpen   = 3 // FailurePolicy.FAIL_OPEN
	tsTypeURL        = 1 // udpa.type.v1.TypedStruct.type_url
	tsValue          = 2 // udpa.type.v1.TypedStruct.value
	durationSeconds  = 1
	durationNanos    = 2
	mapKey, mapValue = 1, 2
)

// conversion is one ECDS resource with remote Wasm code, read off the wire.
type conversion struct {
	name     string // the TypedExtensionConfig's name (Istio: the resource name)
	network  bool
	wasm     []byte // the encoded Wasm filter (converted from a TypedStruct if it was one)
	plugin   []byte // its PluginConfig (merged)
	vm       []byte // the PluginConfig's VmConfig (merged)
	failOpen bool
	out      []byte // the new resource: Any of TypedExtensionConfig
}

// decode returns the resource's Wasm config when its code is remote; nil, nil when the resource
// is not Wasm or loads local code. Like Istio's tryUnmarshal, anything that is not a
// TypedExtensionConfig with a typed config, and Wasm with no code, is an error.
func (r *Rewriter) decode(a []byte) (*conversion, error) {
	typeURL, value, err := anyParts(a)
	if err != nil {
		return nil, fmt.Errorf("failed to unmarshal extension config resource: %w", err)
	}
	if typeURL != fastpath.ExtensionConfigType {
		return nil, fmt.Errorf("failed to unmarshal extension config resource: type %q is not %s", typeURL, fastpath.ExtensionConfigType)
	}
	var name string
	typed, hasTyped, err := merged(value, tecTyped)
	if err == nil {
		name, err = lastString(value, tecName)
	}
	if err != nil {
		return nil, fmt.Errorf("failed to unmarshal extension config resource: %w", err)
	}
	if !hasTyped {
		return nil, fmt.Errorf("typed extension config %q does not contain any typed config", name)
	}
	tt, tv, err := anyParts(typed)
	if err != nil {
		return nil, fmt.Errorf("extension config %q: bad typed config: %w", name, err)
	}
	cv := &conversion{name: name}
	switch tt {
	case wasmHTTPType:
		cv.wasm = tv
	case wasmNetworkType:
		cv.network, cv.wasm = true, tv
	case typedStructType:
		inner, err := lastString(tv, tsTypeURL)
		if err != nil {
			return nil, fmt.Errorf("failed to unmarshal typed config for wasm filter %q: %w", name, err)
		}
		switch inner {
		case wasmHTTPType:
		case wasmNetworkType:
			cv.network = true
		default:
			return nil, nil // a TypedStruct of something else: not Wasm
		}
		st, _, err := merged(tv, tsValue)
		if err == nil {
			cv.wasm, err = structToWasm(st, cv.network)
		}
		if err != nil {
			return nil, fmt.Errorf("failed to convert extension config %q struct to a Wasm filter: %w", name, err)
		}
	default:
		return nil, nil // not Wasm: its bytes pass untouched
	}
	remote, err := cv.read()
	if err != nil {
		return nil, fmt.Errorf("failed to unmarshal extension config %q into a Wasm filter: %w", name, err)
	}
	if !remote {
		return nil, nil
	}
	return cv, nil
}

// read parses the Wasm filter down to its code; it reports whether the code is remote and fails
// when there is none.
func (cv *conversion) read() (remote bool, err error) {
	if cv.plugin, _, err = merged(cv.wasm, wasmConfig); err != nil {
		return false, err
	}
	if cv.vm, _, err = merged(cv.plugin, pluginVM); err != nil {
		return false, err
	}
	open, _, err := lastVarint(cv.plugin, pluginFailOpen)
	if err != nil {
		return false, err
	}
	policy, hasPolicy, err := lastVarint(cv.plugin, pluginPolicy)
	if err != nil {
		return false, err
	}
	// Istio: failure_policy when set, else the deprecated fail_open.
	cv.failOpen = open != 0
	if hasPolicy && policy != 0 {
		cv.failOpen = policy == policyFailOpen
	}
	code, _, err := merged(cv.vm, vmCode)
	if err != nil {
		return false, err
	}
	kind, _, err := oneofCase(code, codeLocal, codeRemote)
	if err != nil {
		return false, err
	}
	if kind == 0 {
		return false, fmt.Errorf("no remote and local load found in Wasm filter %q", cv.name)
	}
	return kind == codeRemote, nil
}

// convert points the VM at the cached module, or builds the fail-open or fail-closed RBAC
// filter when the module cannot be had (Istio: convertHTTPWasmConfigFromRemoteToLocal and
// createHTTPDefaultFilter). Only a cancelled ctx is an error.
func (r *Rewriter) convert(ctx context.Context, cv *conversion) error {
	status := conversionSuccess
	vm, err := r.rewriteVM(ctx, cv, &status)
	if err == nil {
		plugin := replaceField(nil, cv.plugin, pluginVM, vm, true)
		wasm := replaceField(nil, cv.wasm, wasmConfig, plugin, true)
		typeURL := wasmHTTPType
		if cv.network {
			typeURL = wasmNetworkType
		}
		cv.out = typedExtensionConfig(cv.name, typeURL, wasm)
	}
	r.m.conversions.With(status).Inc()
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	r.log.Error("error in converting the wasm config to local; applying RBAC filter", "resource", cv.name, "err", err, "allow", cv.failOpen)
	cv.out = fallback(cv.name, cv.network, cv.failOpen)
	return nil
}

// rewriteVM is Istio's rewriteVMConfig: read and strip the agent's VM environment, fetch, and
// return the VmConfig with its code pointing at the file.
func (r *Rewriter) rewriteVM(ctx context.Context, cv *conversion, status *string) ([]byte, error) {
	var opts GetOptions
	vm := cv.vm
	env, hasEnv, err := merged(vm, vmEnv)
	if err != nil {
		return nil, err
	}
	if hasEnv {
		kv, kept, hostKeys, err := readEnv(env)
		if err != nil {
			return nil, err
		}
		if sec, ok := kv[envPullSecret]; ok {
			if sec == "" {
				*status = fetchFailure
				plugin, _ := lastString(cv.plugin, pluginName)
				return nil, fmt.Errorf("cannot fetch Wasm module %v: missing image pulling secret", plugin)
			}
			opts.PullSecret = []byte(sec)
		}
		switch kv[envPullPolicy] {
		case "IfNotPresent":
			opts.PullPolicy = PullIfNotPresent
		case "Always":
			opts.PullPolicy = PullAlways
		}
		opts.ResourceVersion = kv[envResourceVersion]
		// Istiod's ISTIO_META_ variables are for the agent: Envoy and the module never see them.
		// With no variable left, the environment goes too (host keys alone stay).
		keep := len(kept) > 0 || len(hostKeys) > 0
		vm = replaceField(nil, vm, vmEnv, appendEnv(nil, hostKeys, kept), keep)
	}
	code, _, _ := merged(vm, vmCode)
	_, remote, _ := oneofCase(code, codeLocal, codeRemote)
	uri, hasURI, err := merged(remote, remoteHTTPURI)
	if err != nil {
		return nil, err
	}
	if !hasURI {
		*status = missRemoteFetchHint
		return nil, fmt.Errorf("wasm remote fetch of %s does not have httpUri specified", cv.name)
	}
	if opts.Checksum, err = lastString(remote, remoteSHA256); err != nil {
		return nil, err
	}
	if opts.Checksum == "nil" { // Istiod's placeholder for "not set"
		opts.Checksum = ""
	}
	u, err := lastString(uri, uriURI)
	if err != nil {
		return nil, err
	}
	opts.Timeout = defaultPullTimeout
	if d, ok, err := merged(uri, uriTimeout); err != nil {
		return nil, err
	} else if ok {
		secs, _, err1 := lastVarint(d, durationSeconds)
		nanos, _, err2 := lastVarint(d, durationNanos)
		if err1 != nil || err2 != nil {
			return nil, errMalformed
		}
		opts.Timeout = time.Duration(int64(secs))*time.Second + time.Duration(int32(nanos))
	}
	opts.ResourceName = cv.name
	path, err := r.c.Get(ctx, u, opts)
	if err != nil {
		*status = fetchFailure
		return nil, fmt.Errorf("cannot fetch Wasm module %v: %w", u, err)
	}
	local := protowire.AppendTag(nil, dataFilename, protowire.BytesType)
	local = protowire.AppendString(local, path)
	newCode := protowire.AppendTag(nil, codeLocal, protowire.BytesType)
	newCode = protowire.AppendBytes(newCode, local)
	return replaceField(nil, vm, vmCode, newCode, true), nil
}

// readEnv reads EnvironmentVariables: the key/value map (later entries win, as map parsing
// does), the raw entries whose key is not Istio's, and the raw host key fields.
func readEnv(env []byte) (kv map[string]string, kept, hostKeys [][]byte, err error) {
	kv = map[string]string{}
	err = eachAnyField(env, func(f protowire.Number, v []byte) {
		switch f {
		case envHostKeys:
			hostKeys = append(hostKeys, v)
		case envKeyValues:
			k, _ := lastString(v, mapKey)
			val, _ := lastString(v, mapValue)
			kv[k] = val
			if !strings.HasPrefix(k, istioMetaPrefix) {
				kept = append(kept, v)
			}
		}
	})
	return kv, kept, hostKeys, err
}

func appendEnv(dst []byte, hostKeys, kv [][]byte) []byte {
	for _, h := range hostKeys {
		dst = protowire.AppendTag(dst, envHostKeys, protowire.BytesType)
		dst = protowire.AppendBytes(dst, h)
	}
	for _, e := range kv {
		dst = protowire.AppendTag(dst, envKeyValues, protowire.BytesType)
		dst = protowire.AppendBytes(dst, e)
	}
	return dst
}
