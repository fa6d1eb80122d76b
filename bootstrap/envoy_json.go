package bootstrap

// appendJSON methods of the bootstrap types (envoy.go): each writes the fields in declaration
// order under their json tags, honouring omitempty field by field, exactly as encoding/json would
// (jsonw_test.go compares the two on every golden input and on random values). A nil pointer
// writes null. Keep these in step with the struct tags: TestAppendJSONCoversEveryField fails
// when a field is added to a struct and not written here.

// appendSlice writes s as a JSON array of its elements; nil is null. The loop is in array, not
// here: each element type gets its own copy of a generic body, so it is kept to one call.
func appendSlice[T any, P interface {
	*T
	jsonAppender
}](w *jsonWriter, s []T) {
	w.array(len(s), s == nil, func(i int) { P(&s[i]).appendJSON(w) })
}

// array writes n elements with elem; isNil writes null instead.
func (w *jsonWriter) array(n int, isNil bool, elem func(i int)) {
	if isNil {
		w.null()
		return
	}
	w.beginArray()
	for i := range n {
		w.elem()
		elem(i)
	}
	w.endArray()
}

// strField writes a string member, skipped when empty if omitEmpty.
//
//go:noinline
func (w *jsonWriter) strField(name, v string, omitEmpty bool) {
	if omitEmpty && v == "" {
		return
	}
	w.field(name)
	w.str(v)
}

// boolField writes a bool member, skipped when false if omitEmpty.
//
//go:noinline
func (w *jsonWriter) boolField(name string, v, omitEmpty bool) {
	if omitEmpty && !v {
		return
	}
	w.field(name)
	w.bool(v)
}

// uintField writes an unsigned member, skipped when 0 if omitEmpty.
//
//go:noinline
func (w *jsonWriter) uintField(name string, v uint32, omitEmpty bool) {
	if omitEmpty && v == 0 {
		return
	}
	w.field(name)
	w.uint(uint64(v))
}

// emptyObjectField writes a *struct{} member (an empty proto message): {} when set, null when
// nil unless omitEmpty.
//
//go:noinline
func (w *jsonWriter) emptyObjectField(name string, v *struct{}, omitEmpty bool) {
	if omitEmpty && v == nil {
		return
	}
	w.field(name)
	if v == nil {
		w.null()
		return
	}
	w.beginObject()
	w.endObject()
}

func (b *Bootstrap) appendJSON(w *jsonWriter) {
	if b == nil {
		w.null()
		return
	}
	w.beginObject()
	w.field("node")
	b.Node.appendJSON(w)
	if b.LayeredRuntime != nil {
		w.field("layered_runtime")
		b.LayeredRuntime.appendJSON(w)
	}
	if len(b.BootstrapExtensions) > 0 {
		w.field("bootstrap_extensions")
		appendSlice(w, b.BootstrapExtensions)
	}
	if b.StatsConfig != nil {
		w.field("stats_config")
		b.StatsConfig.appendJSON(w)
	}
	if b.Admin != nil {
		w.field("admin")
		b.Admin.appendJSON(w)
	}
	if b.DynamicResources != nil {
		w.field("dynamic_resources")
		b.DynamicResources.appendJSON(w)
	}
	if b.StaticResources != nil {
		w.field("static_resources")
		b.StaticResources.appendJSON(w)
	}
	if b.Tracing != nil {
		w.field("tracing")
		b.Tracing.appendJSON(w)
	}
	if len(b.StatsSinks) > 0 {
		w.field("stats_sinks")
		appendSlice(w, b.StatsSinks)
	}
	if b.ClusterManager != nil {
		w.field("cluster_manager")
		b.ClusterManager.appendJSON(w)
	}
	if b.OverloadManager != nil {
		w.field("overload_manager")
		b.OverloadManager.appendJSON(w)
	}
	if b.ApplicationLogConfig != nil {
		w.field("application_log_config")
		b.ApplicationLogConfig.appendJSON(w)
	}
	if b.DeferredStatOptions != nil {
		w.field("deferred_stat_options")
		b.DeferredStatOptions.appendJSON(w)
	}
	w.strField("stats_flush_interval", b.StatsFlushInterval, true)
	w.strField("stats_eviction_interval", b.StatsEvictionInterval, true)
	w.endObject()
}

func (n *Node) appendJSON(w *jsonWriter) {
	if n == nil {
		w.null()
		return
	}
	w.beginObject()
	w.strField("id", n.ID, false)
	w.strField("cluster", n.Cluster, false)
	if n.Locality != nil {
		w.field("locality")
		n.Locality.appendJSON(w)
	}
	if len(n.Metadata) > 0 {
		w.field("metadata")
		w.raw(n.Metadata)
	}
	w.endObject()
}

func (l *Locality) appendJSON(w *jsonWriter) {
	if l == nil {
		w.null()
		return
	}
	w.beginObject()
	w.strField("region", l.Region, true)
	w.strField("zone", l.Zone, true)
	w.strField("sub_zone", l.SubZone, true)
	w.endObject()
}

func (t *TypedExtension) appendJSON(w *jsonWriter) {
	if t == nil {
		w.null()
		return
	}
	w.beginObject()
	w.strField("name", t.Name, false)
	if t.TypedConfig != nil {
		w.field("typed_config")
		w.value(t.TypedConfig)
	}
	w.endObject()
}

func (t *TypedStruct) appendJSON(w *jsonWriter) {
	if t == nil {
		w.null()
		return
	}
	w.beginObject()
	w.strField("@type", t.Type, false)
	w.strField("type_url", t.TypeURL, false)
	w.field("value")
	w.mapAny(t.Value)
	w.endObject()
}

func (l *LayeredRuntime) appendJSON(w *jsonWriter) {
	if l == nil {
		w.null()
		return
	}
	w.beginObject()
	w.field("layers")
	appendSlice(w, l.Layers)
	w.endObject()
}

func (r *RuntimeLayer) appendJSON(w *jsonWriter) {
	if r == nil {
		w.null()
		return
	}
	w.beginObject()
	w.strField("name", r.Name, false)
	if len(r.StaticLayer) > 0 {
		w.field("static_layer")
		w.mapAny(r.StaticLayer)
	}
	w.emptyObjectField("admin_layer", r.AdminLayer, true)
	w.endObject()
}

func (s *StatsConfig) appendJSON(w *jsonWriter) {
	if s == nil {
		w.null()
		return
	}
	w.beginObject()
	w.boolField("use_all_default_tags", s.UseAllDefaultTags, false)
	if len(s.StatsTags) > 0 {
		w.field("stats_tags")
		appendSlice(w, s.StatsTags)
	}
	if s.StatsMatcher != nil {
		w.field("stats_matcher")
		s.StatsMatcher.appendJSON(w)
	}
	if len(s.HistogramBucketSettings) > 0 {
		w.field("histogram_bucket_settings")
		appendSlice(w, s.HistogramBucketSettings)
	}
	w.endObject()
}

func (t *TagSpecifier) appendJSON(w *jsonWriter) {
	if t == nil {
		w.null()
		return
	}
	w.beginObject()
	w.strField("tag_name", t.TagName, false)
	w.strField("regex", t.Regex, false)
	w.endObject()
}

func (s *StatsMatcher) appendJSON(w *jsonWriter) {
	if s == nil {
		w.null()
		return
	}
	w.beginObject()
	w.field("inclusion_list")
	s.InclusionList.appendJSON(w)
	w.endObject()
}

func (l *ListStringMatcher) appendJSON(w *jsonWriter) {
	if l == nil {
		w.null()
		return
	}
	w.beginObject()
	w.field("patterns")
	appendSlice(w, l.Patterns)
	w.endObject()
}

func (s *StringMatcher) appendJSON(w *jsonWriter) {
	if s == nil {
		w.null()
		return
	}
	w.beginObject()
	w.strField("prefix", s.Prefix, true)
	w.strField("suffix", s.Suffix, true)
	if s.SafeRegex != nil {
		w.field("safe_regex")
		s.SafeRegex.appendJSON(w)
	}
	w.endObject()
}

func (r *RegexMatcher) appendJSON(w *jsonWriter) {
	if r == nil {
		w.null()
		return
	}
	w.beginObject()
	w.strField("regex", r.Regex, false)
	w.endObject()
}

func (h *HistogramBucketSettings) appendJSON(w *jsonWriter) {
	if h == nil {
		w.null()
		return
	}
	w.beginObject()
	w.field("match")
	h.Match.appendJSON(w)
	w.field("buckets")
	if h.Buckets == nil {
		w.null()
	} else {
		w.beginArray()
		for _, f := range h.Buckets {
			w.elem()
			w.float(f, 64)
		}
		w.endArray()
	}
	w.endObject()
}

func (a *Admin) appendJSON(w *jsonWriter) {
	if a == nil {
		w.null()
		return
	}
	w.beginObject()
	if len(a.AccessLog) > 0 {
		w.field("access_log")
		appendSlice(w, a.AccessLog)
	}
	w.strField("profile_path", a.ProfilePath, true)
	w.field("address")
	a.Address.appendJSON(w)
	w.endObject()
}

func (a *Address) appendJSON(w *jsonWriter) {
	if a == nil {
		w.null()
		return
	}
	w.beginObject()
	if a.SocketAddress != nil {
		w.field("socket_address")
		a.SocketAddress.appendJSON(w)
	}
	if a.Pipe != nil {
		w.field("pipe")
		a.Pipe.appendJSON(w)
	}
	w.endObject()
}

func (s *SocketAddress) appendJSON(w *jsonWriter) {
	if s == nil {
		w.null()
		return
	}
	w.beginObject()
	w.strField("protocol", s.Protocol, true)
	w.strField("address", s.Address, false)
	w.uintField("port_value", s.PortValue, false)
	w.endObject()
}

func (p *Pipe) appendJSON(w *jsonWriter) {
	if p == nil {
		w.null()
		return
	}
	w.beginObject()
	w.strField("path", p.Path, false)
	w.endObject()
}

func (d *DynamicResources) appendJSON(w *jsonWriter) {
	if d == nil {
		w.null()
		return
	}
	w.beginObject()
	w.field("lds_config")
	d.LdsConfig.appendJSON(w)
	w.field("cds_config")
	d.CdsConfig.appendJSON(w)
	w.field("ads_config")
	d.AdsConfig.appendJSON(w)
	w.endObject()
}

func (c *ConfigSource) appendJSON(w *jsonWriter) {
	if c == nil {
		w.null()
		return
	}
	w.beginObject()
	w.emptyObjectField("ads", c.Ads, true)
	w.strField("initial_fetch_timeout", c.InitialFetchTimeout, true)
	w.strField("resource_api_version", c.ResourceAPIVersion, true)
	w.endObject()
}

func (a *ApiConfigSource) appendJSON(w *jsonWriter) {
	if a == nil {
		w.null()
		return
	}
	w.beginObject()
	w.strField("api_type", a.APIType, false)
	w.boolField("set_node_on_first_message_only", a.SetNodeOnFirstMessageOnly, true)
	w.strField("transport_api_version", a.TransportAPIVersion, true)
	w.field("grpc_services")
	appendSlice(w, a.GRPCServices)
	w.endObject()
}

func (g *GRPCService) appendJSON(w *jsonWriter) {
	if g == nil {
		w.null()
		return
	}
	w.beginObject()
	w.field("envoy_grpc")
	g.EnvoyGRPC.appendJSON(w)
	w.endObject()
}

func (e *EnvoyGRPC) appendJSON(w *jsonWriter) {
	if e == nil {
		w.null()
		return
	}
	w.beginObject()
	w.strField("cluster_name", e.ClusterName, false)
	w.endObject()
}

func (t *Tracing) appendJSON(w *jsonWriter) {
	if t == nil {
		w.null()
		return
	}
	w.beginObject()
	w.field("http")
	t.HTTP.appendJSON(w)
	w.endObject()
}

func (c *ClusterManager) appendJSON(w *jsonWriter) {
	if c == nil {
		w.null()
		return
	}
	w.beginObject()
	w.strField("local_cluster_name", c.LocalClusterName, true)
	if c.OutlierDetection != nil {
		w.field("outlier_detection")
		c.OutlierDetection.appendJSON(w)
	}
	if len(c.LoadStatsConfig) > 0 {
		w.field("load_stats_config")
		w.raw(c.LoadStatsConfig)
	}
	w.boolField("enable_deferred_cluster_creation", c.EnableDeferredClusterCreation, true)
	w.endObject()
}

func (o *OutlierDetection) appendJSON(w *jsonWriter) {
	if o == nil {
		w.null()
		return
	}
	w.beginObject()
	w.strField("event_log_path", o.EventLogPath, false)
	w.endObject()
}

func (o *OverloadManager) appendJSON(w *jsonWriter) {
	if o == nil {
		w.null()
		return
	}
	w.beginObject()
	w.field("resource_monitors")
	appendSlice(w, o.ResourceMonitors)
	w.endObject()
}

func (a *ApplicationLogConfig) appendJSON(w *jsonWriter) {
	if a == nil {
		w.null()
		return
	}
	w.beginObject()
	w.field("log_format")
	a.LogFormat.appendJSON(w)
	w.endObject()
}

func (l *LogFormat) appendJSON(w *jsonWriter) {
	if l == nil {
		w.null()
		return
	}
	w.beginObject()
	w.strField("text_format", l.TextFormat, true)
	if len(l.JSONFormat) > 0 {
		w.field("json_format")
		w.mapString(l.JSONFormat)
	}
	w.endObject()
}

func (d *DeferredStatOptions) appendJSON(w *jsonWriter) {
	if d == nil {
		w.null()
		return
	}
	w.beginObject()
	w.boolField("enable_deferred_creation_stats", d.EnableDeferredCreationStats, false)
	w.endObject()
}
