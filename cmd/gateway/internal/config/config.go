package config

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/replyonce/gateway/ingress"
	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/signatures"
)

// Config is the whole file.
type Config struct {
	Listen  string            `yaml:"listen"`
	Admin   Admin             `yaml:"admin"`
	Store   Store             `yaml:"store"`
	Ledger  Ledger            `yaml:"ledger"`
	Log     Log               `yaml:"log"`
	Server  Server            `yaml:"server"`
	Sources map[string]Source `yaml:"sources"`
}

// Admin is the private listener for the ledger API, metrics and health.
type Admin struct {
	Listen string `yaml:"listen"`
	Token  string `yaml:"token"`
}

// Store picks the ledger backend.
type Store struct {
	Kind string `yaml:"kind"` // memory | bolt | postgres | redis
	Path string `yaml:"path"` // bolt
	URL  string `yaml:"url"`  // postgres, redis
}

// Ledger tunes the ledger.
type Ledger struct {
	PendingTTL  time.Duration `yaml:"pending_ttl"`
	MaxAttempts int           `yaml:"max_attempts"`
	LeaseTTL    time.Duration `yaml:"lease_ttl"`
	Retention   time.Duration `yaml:"retention"`
	// ReplayCache is how many committed entries each instance remembers to
	// answer redeliveries without the store (0: the ledger's default;
	// negative: off).
	ReplayCache int `yaml:"replay_cache"`
}

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
}

// Source is one webhook endpoint.
type Source struct {
	Provider    string        `yaml:"provider"`
	Secrets     []string      `yaml:"secrets"`
	Tolerance   time.Duration `yaml:"tolerance"`
	URL         string        `yaml:"url"`
	VerifyToken string        `yaml:"verify_token"`
	HMAC        *HMAC         `yaml:"hmac"`
	EventID     Templates     `yaml:"event_id"`
	Scope       Templates     `yaml:"scope"`
	ContextAt   Templates     `yaml:"context_at"`
	Runs        string        `yaml:"runs"`
	MaxBody     ByteSize      `yaml:"max_body"`
	RetryAfter  time.Duration `yaml:"retry_after"`
	Forward     Forward       `yaml:"forward"`
}

// HMAC configures the generic HMAC provider.
type HMAC struct {
	Header          string        `yaml:"header"`
	Algorithm       string        `yaml:"algorithm"`
	Encoding        string        `yaml:"encoding"`
	Prefix          string        `yaml:"prefix"`
	Separator       string        `yaml:"separator"`
	Template        string        `yaml:"template"`
	IDHeader        string        `yaml:"id_header"`
	TimestampHeader string        `yaml:"timestamp_header"`
	Tolerance       time.Duration `yaml:"tolerance"`
}

// Forward says where accepted events go.
type Forward struct {
	URL           string            `yaml:"url"`
	Timeout       time.Duration     `yaml:"timeout"`
	Headers       map[string]string `yaml:"headers"`
	SigningSecret string            `yaml:"signing_secret"`
}

// Templates is one extraction template or a list of them (first that
// resolves wins).
type Templates []string

// UnmarshalYAML accepts a string or a list of strings.
func (t *Templates) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		*t = Templates{n.Value}
		return nil
	case yaml.SequenceNode:
		var list []string
		if err := n.Decode(&list); err != nil {
			return err
		}
		*t = list
		return nil
	}
	return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: want a template or a list of templates", n.Line)}}
}

// ByteSize is a size such as 512KiB, 1MiB or 1048576.
type ByteSize int64

// UnmarshalYAML parses sizes with B, KB, KiB, MB, MiB, GB, GiB suffixes.
func (b *ByteSize) UnmarshalYAML(n *yaml.Node) error {
	v, err := ParseByteSize(n.Value)
	if err != nil {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: %v", n.Line, err)}}
	}
	*b = v
	return nil
}

// ParseByteSize parses a size such as "1MiB".
func ParseByteSize(s string) (ByteSize, error) {
	s = strings.TrimSpace(s)
	units := []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1000}, {"MB", 1000 * 1000}, {"GB", 1000 * 1000 * 1000}, {"B", 1}}
	mult := int64(1)
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 || n > (1<<40)/mult {
		return 0, fmt.Errorf("%q is not a size like 512KiB or 1MiB", s)
	}
	return ByteSize(n * mult), nil
}

// Default returns the configuration every file starts from.
func Default() Config {
	return Config{
		Listen: "127.0.0.1:8080",
		Admin:  Admin{Listen: "127.0.0.1:8081"},
		Store:  Store{Kind: "bolt", Path: "data/ledger.db"},
		Log:    Log{Level: "info", Format: "json"},
		Server: Server{ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 30 * time.Second, IdleTimeout: 120 * time.Second, ShutdownGrace: 30 * time.Second,
			StoreTimeout: ingress.DefaultStoreTimeout},
	}
}

// Parse reads a configuration file's bytes. lookup resolves ${VAR}
// (os.LookupEnv in production).
func Parse(data []byte, lookup func(string) (string, bool)) (Config, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(markVariables(data), &root); err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	if len(root.Content) == 0 {
		return Config{}, errors.New("config: the file is empty")
	}
	doc := root.Content[0]
	if err := checkKnown(doc, reflect.TypeOf(Config{}), ""); err != nil {
		return Config{}, err
	}
	paths := map[int][]scalarAt{}
	if err := expand(doc, reflect.TypeOf(Config{}), "", lookup, paths); err != nil {
		return Config{}, err
	}
	cfg := Default()
	if err := doc.Decode(&cfg); err != nil {
		return Config{}, nameFields(err, paths)
	}
	return cfg, cfg.Validate()
}

// checkKnown refuses keys the configuration does not have, naming them:
// a typo must not silently leave a default in place.
func checkKnown(n *yaml.Node, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case n.Kind == yaml.MappingNode && t.Kind() == reflect.Struct:
		fields := map[string]reflect.Type{}
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if name != "" && name != "-" {
				fields[name] = f.Type
			}
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			key := n.Content[i].Value
			ft, ok := fields[key]
			if !ok {
				return fmt.Errorf("config: %s: unknown field (line %d)", join(path, key), n.Content[i].Line)
			}
			if err := checkKnown(n.Content[i+1], ft, join(path, key)); err != nil {
				return err
			}
		}
	case n.Kind == yaml.MappingNode && t.Kind() == reflect.Map:
		for i := 0; i+1 < len(n.Content); i += 2 {
			if err := checkKnown(n.Content[i+1], t.Elem(), join(path, n.Content[i].Value)); err != nil {
				return err
			}
		}
	}
	return nil
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// nameFields puts the field's name in front of yaml's "line N:" errors.
// scalarAt remembers which field a scalar on some line belongs to.
type scalarAt struct{ path, value string }

func nameFields(err error, paths map[int][]scalarAt) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return fmt.Errorf("config: %w", err)
	}
	msgs := make([]string, 0, len(te.Errors))
	for _, m := range te.Errors {
		var line int
		if _, scanErr := fmt.Sscanf(m, "line %d:", &line); scanErr == nil {
			if p := fieldOn(paths[line], m); p != "" {
				m = p + ": " + m
			}
		}
		msgs = append(msgs, m)
	}
	return fmt.Errorf("config: %s", strings.Join(msgs, "; "))
}

// expand replaces ${VAR} in every scalar value, naming the field of any
// variable that is not set. t is the Go type the node decodes into: it
// decides whether an expanded value is text or is read as YAML reads a
// plain scalar (numbers, durations, sizes, booleans).
// It also records which field each line holds, for naming fields in
// decoding errors.
func expand(n *yaml.Node, t reflect.Type, path string, lookup func(string) (string, bool), paths map[int][]scalarAt) error {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			key := n.Content[i].Value
			if err := expand(n.Content[i+1], childType(t, key), join(path, key), lookup, paths); err != nil {
				return err
			}
		}
	case yaml.SequenceNode:
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		for i, c := range n.Content {
			if err := expand(c, elem, fmt.Sprintf("%s[%d]", path, i), lookup, paths); err != nil {
				return err
			}
		}
	case yaml.ScalarNode:
		// Recorded after expansion: decoding errors quote the final value.
		defer func() { paths[n.Line] = append(paths[n.Line], scalarAt{path, n.Value}) }()
		if !strings.Contains(n.Value, "$") {
			return nil
		}
		v, err := expandString(n.Value, lookup)
		if err != nil {
			return fmt.Errorf("config: %s: %w", path, err)
		}
		n.Value = v
		// An expanded value is text, whatever it looks like, unless the
		// field is not a string: then YAML reads it as if written there.
		n.Tag, n.Style = "!!str", yaml.DoubleQuotedStyle
		if isStringish(t) {
			return nil
		}
		n.Tag, n.Style = "", 0
	case yaml.AliasNode:
		return fmt.Errorf("config: %s: YAML aliases are not supported", path)
	}
	return nil
}

// childType is the type of key inside a value of type t: a struct field
// by its yaml tag, or a map's element. nil when unknown (checkKnown has
// refused unknown keys already).
func childType(t reflect.Type, key string) reflect.Type {
	switch {
	case t == nil:
		return nil
	case t.Kind() == reflect.Map:
		return t.Elem()
	case t.Kind() == reflect.Struct:
		for i := range t.NumField() {
			f := t.Field(i)
			if name, _, _ := strings.Cut(f.Tag.Get("yaml"), ","); name == key {
				return f.Type
			}
		}
	}
	return nil
}

// isStringish says whether a scalar for type t is text: a string field, a
// list of strings written as one (Templates), or a type we do not know.
func isStringish(t reflect.Type) bool {
	if t == nil {
		return true
	}
	if t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	return t.Kind() == reflect.String
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
			if !ok || v == "" {
				return "", fmt.Errorf("${%s} is not set", name)
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

// Validate checks everything that does not need a source built.
func (c Config) Validate() error {
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return fmt.Errorf("config: listen: %q is not host:port", c.Listen)
	}
	if c.Admin.Listen != "" {
		host, _, err := net.SplitHostPort(c.Admin.Listen)
		if err != nil {
			return fmt.Errorf("config: admin.listen: %q is not host:port", c.Admin.Listen)
		}
		if c.Admin.Token == "" && !isLoopback(host) {
			return fmt.Errorf("config: admin.token: required when admin.listen (%s) is not a loopback address", c.Admin.Listen)
		}
	}
	switch c.Store.Kind {
	case "memory":
	case "bolt":
		if c.Store.Path == "" {
			return errors.New("config: store.path: required for the bolt store")
		}
	case "postgres", "redis":
		if c.Store.URL == "" {
			return fmt.Errorf("config: store.url: required for the %s store", c.Store.Kind)
		}
	default:
		return fmt.Errorf("config: store.kind: %q is not one of memory, bolt, postgres, redis", c.Store.Kind)
	}
	if c.Ledger.PendingTTL < 0 || c.Ledger.LeaseTTL < 0 || c.Ledger.Retention < 0 || c.Ledger.MaxAttempts < 0 {
		return errors.New("config: ledger: durations and max_attempts must not be negative")
	}
	if c.Server.StoreTimeout <= 0 {
		return errors.New("config: server.store_timeout: must be positive")
	}
	if c.Server.ShutdownGrace <= 0 {
		return errors.New("config: server.shutdown_grace: must be positive")
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		return fmt.Errorf("config: log.level: %q is not one of debug, info, warn, error", c.Log.Level)
	}
	switch c.Log.Format {
	case "json", "console":
	default:
		return fmt.Errorf("config: log.format: %q is not json or console", c.Log.Format)
	}
	if len(c.Sources) == 0 {
		return errors.New("config: sources: at least one source is required")
	}
	_, err := c.BuildSources()
	return err
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// BuildSources turns the source sections into ready ingress sources,
// sorted by name.
func (c Config) BuildSources() ([]*ingress.Source, error) {
	names := make([]string, 0, len(c.Sources))
	for name := range c.Sources {
		names = append(names, name)
	}
	slices.Sort(names)
	out := make([]*ingress.Source, 0, len(names))
	for _, name := range names {
		s := c.Sources[name]
		if s.Provider == "" {
			return nil, fmt.Errorf("config: sources.%s.provider: required (one of %s)", name, strings.Join(signatures.Providers(), ", "))
		}
		sc := ingress.SourceConfig{
			Name: name, Provider: s.Provider,
			Signature: signatures.Config{Secrets: s.Secrets, Tolerance: s.Tolerance, URL: s.URL, VerifyToken: s.VerifyToken},
			EventID:   s.EventID, Scope: s.Scope, Runs: ledger.Mode(s.Runs), MaxBody: int64(s.MaxBody), RetryAfter: s.RetryAfter,
			Forward: ingress.ForwardConfig{URL: s.Forward.URL, Timeout: s.Forward.Timeout, Headers: s.Forward.Headers, SigningSecret: s.Forward.SigningSecret},
		}
		if len(s.ContextAt) > 0 && !(len(s.ContextAt) == 1 && s.ContextAt[0] == "receipt") {
			sc.ContextAt = s.ContextAt
		}
		if h := s.HMAC; h != nil {
			sc.Signature.HMAC = &signatures.HMACConfig{Header: h.Header, Algorithm: h.Algorithm, Encoding: h.Encoding, Prefix: h.Prefix,
				Separator: h.Separator, Template: h.Template, IDHeader: h.IDHeader, TimestampHeader: h.TimestampHeader, Tolerance: h.Tolerance}
		}
		src, err := ingress.NewSource(sc)
		if err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
		out = append(out, src)
	}
	return out, nil
}

// LedgerOptions converts the ledger section.
func (c Config) LedgerOptions() ledger.Options {
	return ledger.Options{PendingTTL: c.Ledger.PendingTTL, MaxAttempts: c.Ledger.MaxAttempts, LeaseTTL: c.Ledger.LeaseTTL,
		Retention: c.Ledger.Retention, ReplayCache: c.Ledger.ReplayCache}
}
