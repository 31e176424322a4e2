package config

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/replyonce/gateway/cmd/gateway/internal/suggest"
	"github.com/replyonce/gateway/ingress"
	"github.com/replyonce/gateway/ingress/dispatch"
	"github.com/replyonce/gateway/ingress/dispatch/alerts"
	"github.com/replyonce/gateway/ingress/extract"
	"github.com/replyonce/gateway/ingress/field"
	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/signatures"
	"github.com/replyonce/gateway/stores"
)

// Config is the whole file.
type Config struct {
	Listen  string         `yaml:"listen"`
	TLS     TLS            `yaml:"tls"`
	Admin   Admin          `yaml:"admin"`
	Store   Store          `yaml:"store"`
	Ledger  ledger.Options `yaml:"ledger"`
	Log     Log            `yaml:"log"`
	Server  Server         `yaml:"server"`
	Tracing Tracing        `yaml:"tracing"`
	// Alerts is the alerts package's own configuration (targets,
	// after_failures, console_url), read into it with nothing between.
	Alerts alerts.Config `yaml:"alerts"`
	// Sources are the packages' own source configuration: the YAML keys
	// are ingress.SourceConfig's tags, read into it with nothing between.
	Sources map[string]ingress.SourceConfig `yaml:"sources"`
}

// TLS, when set, makes the public listener serve HTTPS itself. SIGHUP
// reloads both files on Linux and macOS; Windows has no SIGHUP, so there
// serve checks the files every CheckEvery instead.
type TLS struct {
	Cert string `yaml:"cert"`
	Key  string `yaml:"key"`
	// CheckEvery is how often serve looks at the two files and reloads
	// them when either changed (size or modification time). Unset: off
	// where SIGHUP reloads (Linux, macOS), one minute on Windows.
	CheckEvery time.Duration `yaml:"check_every"`
}

// Admin is the private listener for the ledger API, metrics and health.
type Admin struct {
	Listen string `yaml:"listen"`
	Token  string `yaml:"token"`
	// AllowedHosts are host names, besides the listen address's own, that
	// requests to the admin listener may carry in Host (a service name such
	// as "gateway" that agents use, a name in front of a proxy). Anything
	// else is refused: see docs/security.md, DNS rebinding.
	AllowedHosts []string `yaml:"allowed_hosts"`
	// TrustForwardedProto: the admin listener is reached only through a
	// TLS proxy that sets X-Forwarded-Proto, so the console may believe
	// it (its session cookie is then Secure and __Host-).
	TrustForwardedProto bool `yaml:"trust_forwarded_proto"`
}

// MinAdminToken is the shortest admin.token accepted: it guards every
// event body and the ledger, and /login lets ten guesses a minute.
const MinAdminToken = 16

// Store picks the ledger backend: the stores package's own config, which
// opens it (stores.Open) and checks it.
type Store = stores.Config

// Log sets logging.
type Log struct {
	Level  string `yaml:"level"`  // debug | info | warn | error
	Format string `yaml:"format"` // json | console
}

// Server holds the public listener's timeouts.
type Server struct {
	ReadHeaderTimeout time.Duration `yaml:"read_header_timeout"`
	ReadTimeout       time.Duration `yaml:"read_timeout"`
	IdleTimeout       time.Duration `yaml:"idle_timeout"`
	ShutdownGrace     time.Duration `yaml:"shutdown_grace"`
	// StoreTimeout bounds each ledger call made for a webhook.
	StoreTimeout time.Duration `yaml:"store_timeout"`
	// MaxHeaderBytes bounds a request's line and headers, on both
	// listeners (default 64 KiB; no provider sends more than a few KiB).
	MaxHeaderBytes ingress.ByteSize `yaml:"max_header_bytes"`
	// MaxConnections bounds the public listener's open connections; more
	// wait in the kernel's accept queue (default 4096).
	MaxConnections int `yaml:"max_connections"`
}

// Defaults of the server limits.
const (
	DefaultMaxHeaderBytes = 64 << 10
	DefaultMaxConnections = 4096
)

// Default returns the configuration every file starts from.
func Default() Config {
	return Config{
		Listen: "127.0.0.1:8080",
		Admin:  Admin{Listen: "127.0.0.1:8081"},
		Store:  Store{Kind: "bolt", Path: "data/ledger.db"},
		Log:    Log{Level: "info", Format: "json"},
		Server: Server{ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 30 * time.Second, IdleTimeout: 120 * time.Second, ShutdownGrace: 30 * time.Second,
			StoreTimeout: ingress.DefaultStoreTimeout, MaxHeaderBytes: DefaultMaxHeaderBytes, MaxConnections: DefaultMaxConnections},
	}
}

// parser gathers every problem of one file instead of stopping at the
// first, so that one `gateway check` run lists them all.
type parser struct {
	lookup func(string) (string, bool)
	errs   []*field.Error
	lines  map[string]int // field path → line, to place later errors
	paths  map[int][]scalarAt
	// meant are the fields a misspelt key was probably meant to be
	// ("forwrd" for forward): what is missing under one is a consequence
	// of the typo, already reported.
	meant []string
}

func (p *parser) add(n *yaml.Node, path string, err error) {
	p.errs = append(p.errs, &field.Error{Field: path, Line: n.Line, Err: err})
	// Decoding must not report the same value again: a bad value becomes
	// no value.
	n.Kind, n.Tag, n.Value, n.Style, n.Content = yaml.ScalarNode, "!!null", "", 0, nil
}

// Parse reads a configuration file's bytes. lookup resolves ${VAR}
// (os.LookupEnv in production). Its error joins one *field.Error per
// problem (see field.List), unless the file is not YAML at all.
func Parse(data []byte, lookup func(string) (string, bool)) (Config, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(markVariables(data), &root); err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	if len(root.Content) == 0 {
		return Config{}, errors.New("config: the file is empty")
	}
	doc := root.Content[0]
	p := &parser{lookup: lookup, lines: map[string]int{}, paths: map[int][]scalarAt{}}
	p.expand(doc, "")
	p.walk(doc, reflect.TypeOf(Config{}), "")
	cfg := Default()
	if err := doc.Decode(&cfg); err != nil {
		p.decodeErrors(err)
	}
	p.refuseNoOps(cfg)
	if err := cfg.Validate(); err != nil {
		for _, fe := range field.List(err) {
			if p.covered(fe.Field) {
				continue // a consequence of a problem already reported
			}
			if fe.Line == 0 {
				fe.Line = p.lineOf(fe.Field)
			}
			p.errs = append(p.errs, fe)
		}
	}
	if len(p.errs) == 0 {
		return cfg, nil
	}
	// In file order; problems with no line (a missing field) last.
	slices.SortStableFunc(p.errs, func(a, b *field.Error) int {
		if (a.Line == 0) != (b.Line == 0) {
			return b.Line - a.Line
		}
		return a.Line - b.Line
	})
	errs := make([]error, len(p.errs))
	for i, e := range p.errs {
		errs[i] = e
	}
	return cfg, errors.Join(errs...)
}

// refuseNoOps refuses values written in the file that do nothing: each
// reads as unset and silently means the default, which is not what
// whoever wrote it meant. Only values present in the file are refused
// (p.lines): the same zero left out is the default, as documented.
func (p *parser) refuseNoOps(cfg Config) {
	refuse := func(path, format string, args ...any) {
		if line, ok := p.lines[path]; ok && !p.covered(path) {
			p.errs = append(p.errs, &field.Error{Field: path, Line: line, Err: fmt.Errorf(format, args...)})
		}
	}
	if cfg.Ledger.Retention == 0 {
		refuse("ledger.retention", "0s does not turn retention off: it means the default %s; leave it out, or give a positive duration",
			ledger.DefaultRetention)
	}
	for name, sc := range cfg.Sources {
		path := "sources." + name + ".forward"
		if sc.Forward.Queue.Concurrency == 0 {
			refuse(path+".concurrency", "0 is not a limit: it means the default %d; leave it out, or give 1 or more",
				dispatch.DefaultConcurrency)
		}
		if len(sc.Forward.Queue.Retry.Backoff.Schedule) == 0 {
			refuse(path+".retry.schedule", "an empty schedule means the default one (%s); leave it out, or list at least one delay",
				formatSchedule(dispatch.DefaultSchedule))
		}
	}
}

// formatSchedule writes a retry schedule as the configuration does.
func formatSchedule(s []time.Duration) string {
	parts := make([]string, len(s))
	for i, d := range s {
		parts[i] = d.String()
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// covered reports whether field is, contains or is inside a field with a
// problem already reported.
func (p *parser) covered(field string) bool {
	within := func(inner, outer string) bool {
		return inner == outer || strings.HasPrefix(inner, outer) && (inner[len(outer)] == '.' || inner[len(outer)] == '[')
	}
	for _, e := range p.errs {
		if within(field, e.Field) || within(e.Field, field) {
			return true
		}
	}
	for _, m := range p.meant {
		if within(field, m) {
			return true
		}
	}
	return false
}

// lineOf finds the line of field or of its nearest enclosing field.
func (p *parser) lineOf(field string) int {
	for f := field; f != ""; {
		if l, ok := p.lines[f]; ok {
			return l
		}
		i := strings.LastIndexAny(f, ".[")
		if i < 0 {
			break
		}
		f = f[:i]
	}
	return 0
}

var (
	durationType  = reflect.TypeOf(time.Duration(0))
	byteSizeType  = reflect.TypeOf(ingress.ByteSize(0))
	templatesType = reflect.TypeOf(extract.Templates(nil))
)

// walk checks the document against the Config type: unknown keys (with
// the closest valid name), durations and sizes, each with a message that
// says what to write instead.
func (p *parser) walk(n *yaml.Node, t reflect.Type, path string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return
	}
	switch {
	case t == durationType:
		if n.Kind != yaml.ScalarNode {
			p.add(n, path, errors.New("want a duration such as 10s"))
			return
		}
		if _, err := strconv.ParseFloat(n.Value, 64); err == nil && n.Value != "0" {
			p.add(n, path, fmt.Errorf("%s has no unit: write %ss (or %sms, %sm)", n.Value, n.Value, n.Value, n.Value))
			return
		}
		if n.Value == "0" {
			n.Value, n.Tag = "0s", "!!str"
		}
		if _, err := time.ParseDuration(n.Value); err != nil {
			p.add(n, path, fmt.Errorf("%q is not a duration: write one such as 10s, 500ms or 1m30s", n.Value))
		}
	case t == byteSizeType:
		if _, err := ingress.ParseByteSize(n.Value); err != nil || n.Kind != yaml.ScalarNode {
			if err == nil {
				err = errors.New("want a size such as 1MiB")
			}
			p.add(n, path, err)
		}
	case t == templatesType && n.Kind != yaml.ScalarNode && n.Kind != yaml.SequenceNode:
		p.add(n, path, errors.New("want a template or a list of templates"))
	case n.Kind == yaml.MappingNode && t.Kind() == reflect.Struct:
		fields, names := yamlFields(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			key := n.Content[i]
			ft, ok := fields[key.Value]
			if !ok {
				p.errs = append(p.errs, &field.Error{Field: join(path, key.Value), Line: key.Line,
					Err: fmt.Errorf("unknown field%s", suggest.Hint(key.Value, names))})
				if c := suggest.Closest(key.Value, names); c != "" {
					p.meant = append(p.meant, join(path, c))
				}
				continue
			}
			p.walk(n.Content[i+1], ft, join(path, key.Value))
		}
	case n.Kind == yaml.MappingNode && t.Kind() == reflect.Map:
		for i := 0; i+1 < len(n.Content); i += 2 {
			p.walk(n.Content[i+1], t.Elem(), join(path, n.Content[i].Value))
		}
	case n.Kind == yaml.SequenceNode && t.Kind() == reflect.Slice:
		for i, c := range n.Content {
			p.walk(c, t.Elem(), fmt.Sprintf("%s[%d]", path, i))
		}
	}
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// scalarAt remembers which field a scalar on some line belongs to.
type scalarAt struct{ path, value string }

// decodeErrors turns yaml's "line N: ..." messages into field errors.
func (p *parser) decodeErrors(err error) {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		p.errs = append(p.errs, &field.Error{Field: "(file)", Err: err})
		return
	}
	for _, m := range te.Errors {
		var line int
		name := "(file)"
		if _, scanErr := fmt.Sscanf(m, "line %d:", &line); scanErr == nil {
			m = strings.TrimSpace(strings.TrimPrefix(m, fmt.Sprintf("line %d:", line)))
			if f := fieldOn(p.paths[line], m); f != "" {
				name = f
			}
		}
		p.errs = append(p.errs, &field.Error{Field: name, Line: line, Err: errors.New(m)})
	}
}

// expand replaces ${VAR} in every scalar value, reporting each variable
// that is unset or empty under its field. It also records which field
// each line holds, for naming fields in decoding errors.
func (p *parser) expand(n *yaml.Node, path string) {
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := join(path, n.Content[i].Value)
			if _, ok := p.lines[k]; !ok {
				p.lines[k] = n.Content[i].Line
			}
			p.expand(n.Content[i+1], k)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			k := fmt.Sprintf("%s[%d]", path, i)
			p.lines[k] = c.Line
			p.expand(c, k)
		}
	case yaml.ScalarNode:
		if strings.Contains(n.Value, "$") {
			v, err := expandString(n.Value, p.lookup)
			if err != nil {
				p.add(n, path, err)
				return
			}
			n.Value = v
			// An expanded value is text, whatever it looks like.
			n.Tag, n.Style = "!!str", yaml.DoubleQuotedStyle
			if !isStringish(typeAt(reflect.TypeOf(Config{}), path)) {
				n.Tag, n.Style = "", 0
			}
		}
		// Recorded after expansion: decoding errors quote the final value.
		p.paths[n.Line] = append(p.paths[n.Line], scalarAt{path, n.Value})
	case yaml.AliasNode:
		p.add(n, path, errors.New("YAML aliases are not supported"))
	}
}

// fieldOn picks the field a decoding error on one line is about: the only
// scalar there, or the one whose value the message quotes.
func fieldOn(candidates []scalarAt, msg string) string {
	if len(candidates) == 1 {
		return candidates[0].path
	}
	for _, c := range candidates {
		if strings.Contains(msg, "`"+c.value+"`") {
			return c.path
		}
	}
	return ""
}

// typeAt is the Go type a field path such as "sources.x.forward.timeout"
// or "sources.x.secrets[0]" decodes into; nil when unknown. Source names
// hold no '.' or '[' (ingress refuses them), so segments split cleanly.
func typeAt(t reflect.Type, path string) reflect.Type {
	for _, seg := range strings.Split(path, ".") {
		name, idx, _ := strings.Cut(seg, "[")
		t = childType(t, name)
		for ; idx != "" && t != nil; _, idx, _ = strings.Cut(idx, "[") {
			if t.Kind() != reflect.Slice && t.Kind() != reflect.Array {
				return nil
			}
			t = t.Elem()
		}
	}
	return t
}

// childType is the type of key inside a value of type t: a struct field
// by its yaml tag, or a map's element.
func childType(t reflect.Type, key string) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == nil:
		return nil
	case t.Kind() == reflect.Map:
		return t.Elem()
	case t.Kind() == reflect.Struct:
		fields, _ := yamlFields(t)
		return fields[key]
	}
	return nil
}

// yamlFields lists the keys a struct takes in YAML and their types, in
// field order: each field by its tag, and the fields of an ",inline"
// struct as the struct's own (a source's secrets, written beside its
// provider, are ingress.SourceConfig.Signature's).
func yamlFields(t reflect.Type) (map[string]reflect.Type, []string) {
	fields := map[string]reflect.Type{}
	var names []string
	var collect func(reflect.Type)
	collect = func(t reflect.Type) {
		for i := range t.NumField() {
			f := t.Field(i)
			name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			switch {
			case name == "" && opts == "inline" && f.Type.Kind() == reflect.Struct:
				collect(f.Type)
			case name != "" && name != "-":
				fields[name] = f.Type
				names = append(names, name)
			}
		}
	}
	collect(t)
	return fields, names
}

// isStringish says whether a scalar for type t is text: a string field, a
// list of strings written as one (Templates), or a type we do not know.
func isStringish(t reflect.Type) bool {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return true
	}
	if t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	return t.Kind() == reflect.String
}

// markVariables rewrites ${NAME} as $(env:NAME) before parsing: braces
// are flow indicators in YAML, so `secrets: [${SECRET}]` would not parse,
// while parentheses are plain text everywhere. "$$" is left for expandString.
func markVariables(data []byte) []byte {
	var b bytes.Buffer
	for i := 0; i < len(data); i++ {
		c := data[i]
		if c == '$' && i+1 < len(data) && data[i+1] == '$' {
			b.WriteString("$$")
			i++
			continue
		}
		if c == '$' && i+1 < len(data) && data[i+1] == '{' {
			if end := bytes.IndexByte(data[i:], '}'); end > 0 && !bytes.ContainsAny(data[i+2:i+end], "\n)") {
				b.WriteString("$(env:")
				b.Write(data[i+2 : i+end])
				b.WriteByte(')')
				i += end
				continue
			}
		}
		b.WriteByte(c)
	}
	return b.Bytes()
}

func isVarName(s []byte) bool {
	if len(s) == 0 {
		return false
	}
	for i, c := range s {
		letter := c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z'
		if !letter && !(i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

const varOpen = "$(env:"

func expandString(s string, lookup func(string) (string, bool)) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch {
		case strings.HasPrefix(s[i:], "$$"):
			b.WriteByte('$')
			i++
		case strings.HasPrefix(s[i:], varOpen):
			end := strings.IndexByte(s[i:], ')')
			name := s[i+len(varOpen) : i+end]
			if !isVarName([]byte(name)) {
				return "", fmt.Errorf("${%s}: a variable name is letters, digits and _, not starting with a digit", name)
			}
			v, ok := lookup(name)
			if !ok {
				return "", fmt.Errorf("${%s} is not set", name)
			}
			if v == "" {
				return "", fmt.Errorf("${%s} is set but empty", name)
			}
			b.WriteString(v)
			i += end
		case strings.HasPrefix(s[i:], "${"):
			return "", fmt.Errorf("unclosed ${ in a value")
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String(), nil
}

// Validate checks everything that does not need a source built. Its
// error joins one *field.Error per problem.
func (c Config) Validate() error {
	var errs []error
	bad := func(name, format string, args ...any) { errs = append(errs, field.Errorf(name, format, args...)) }
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		bad("listen", "%q is not host:port", c.Listen)
	}
	if (c.TLS.Cert == "") != (c.TLS.Key == "") {
		bad("tls", "set both cert and key, or neither")
	}
	if c.TLS.CheckEvery < 0 {
		bad("tls.check_every", "%s is negative; leave it unset for the platform's default", c.TLS.CheckEvery)
	}
	if c.Admin.Listen != "" {
		host, _, err := net.SplitHostPort(c.Admin.Listen)
		switch {
		case err != nil:
			bad("admin.listen", "%q is not host:port", c.Admin.Listen)
		case c.Admin.Token == "" && !isLoopback(host):
			bad("admin.token", "required when admin.listen (%s) is not a loopback address", c.Admin.Listen)
		case c.Admin.Token != "" && len(c.Admin.Token) < MinAdminToken:
			bad("admin.token", "is %d bytes, want at least %d (e.g. openssl rand -hex 24)", len(c.Admin.Token), MinAdminToken)
		}
	}
	if c.Server.MaxHeaderBytes < 4<<10 || c.Server.MaxHeaderBytes > 1<<20 {
		bad("server.max_header_bytes", "%d: want 4KiB to 1MiB", c.Server.MaxHeaderBytes)
	}
	if c.Server.MaxConnections < 1 {
		bad("server.max_connections", "%d: must be at least 1", c.Server.MaxConnections)
	}
	for i, h := range c.Admin.AllowedHosts {
		if h == "" || strings.ContainsAny(h, "/:@ *?#") && net.ParseIP(strings.Trim(h, "[]")) == nil {
			bad(fmt.Sprintf("admin.allowed_hosts[%d]", i), "%q is not a host name or address (no scheme, port or wildcard)", h)
		}
	}
	if !slices.Contains(stores.Kinds(), c.Store.Kind) {
		bad("store.kind", "%q is not one of %s%s", c.Store.Kind, strings.Join(stores.Kinds(), ", "),
			suggest.Hint(c.Store.Kind, stores.Kinds()))
	} else {
		for _, fe := range c.Store.Check() {
			errs = append(errs, fe)
		}
	}
	for _, d := range []struct {
		field string
		v     time.Duration
	}{{"ledger.pending_ttl", c.Ledger.PendingTTL}, {"ledger.lease_ttl", c.Ledger.LeaseTTL}, {"ledger.retention", c.Ledger.Retention}} {
		if d.v < 0 {
			bad(d.field, "must not be negative")
		}
	}
	if c.Ledger.MaxAttempts < 0 {
		bad("ledger.max_attempts", "must not be negative")
	}
	c.validateCaps(bad)
	if c.Server.StoreTimeout <= 0 {
		bad("server.store_timeout", "must be positive")
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		bad("log.level", "%q is not one of debug, info, warn, error", c.Log.Level)
	}
	switch c.Log.Format {
	case "json", "console":
	default:
		bad("log.format", "%q is not json or console", c.Log.Format)
	}
	errs = append(errs, c.Tracing.validate()...)
	if err := c.Alerts.Validate(); err != nil {
		errs = append(errs, err)
	}
	if len(c.Sources) == 0 {
		bad("sources", "at least one source is required")
	}
	if _, err := c.BuildSources(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// BuildSources turns the source sections into ready ingress sources,
// sorted by name. Its error joins one *field.Error per problem.
func (c Config) BuildSources() ([]*ingress.Source, error) {
	names := make([]string, 0, len(c.Sources))
	for name := range c.Sources {
		names = append(names, name)
	}
	slices.Sort(names)
	out := make([]*ingress.Source, 0, len(names))
	// One certificate and key cache for every source (sns, paypal, plaid), pinned to their hosts.
	fetcher := signatures.NewFetcher(signatures.FetcherOptions{Client: &http.Client{Transport: http.DefaultTransport}})
	var errs []error
	for _, name := range names {
		sc := c.Sources[name]
		if sc.Provider == "" {
			errs = append(errs, field.Errorf("sources."+name+".provider", "required (one of %s)", strings.Join(signatures.Providers(), ", ")))
			continue
		}
		sc.Name = name
		sc.Signature.Fetcher = fetcher
		src, err := ingress.NewSource(sc)
		if err != nil {
			for _, e := range sourceErrors(name, err) {
				if errors.Is(e, signatures.ErrUnknownProvider) {
					// The hint lives here, beside the other "did you
					// mean"s, not in the signatures registry.
					e = field.Errorf("sources."+name+".provider", "unknown provider %q%s (gateway providers lists them)",
						sc.Provider, suggest.Hint(sc.Provider, signatures.Providers()))
				}
				errs = append(errs, e)
			}
			continue
		}
		out = append(out, src)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// Warnings are what a valid configuration still gets wrong in a way an
// operator should hear of once, at check and at start: a source that
// forwards unsigned lets anything that reaches the agent's URL pose as
// the gateway.
func (c Config) Warnings() []string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(c.Sources)) {
		if c.Sources[name].Forward.SigningSecret == "" {
			out = append(out, fmt.Sprintf("sources.%s.forward.signing_secret is not set: the agent cannot tell the gateway's forwards from anyone else's requests to its URL", name))
		}
	}
	return out
}

// sourceErrors lists what NewSource returned: one *field.Error, or
// several joined (a source's bad ignore rules all at once); anything else
// is named after the source.
func sourceErrors(name string, err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, sourceErrors(name, e)...)
		}
		return out
	}
	var fe *field.Error
	if errors.As(err, &fe) {
		return []error{fe}
	}
	return []error{field.Wrap("sources."+name, err)}
}
