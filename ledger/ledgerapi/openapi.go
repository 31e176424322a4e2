package ledgerapi

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"net/http"

	"go.yaml.in/yaml/v3"
)

// openAPIYAML is the OpenAPI 3.1 description of this API, kept in the
// repository next to the code it describes; the tests beside it
// hold it to the routes, wire types and error codes of the handler.
//
//go:embed openapi.yaml
var openAPIYAML []byte

// OpenAPIYAML returns the OpenAPI 3.1 document of the ledger API as kept in
// the repository (YAML).
func OpenAPIYAML() []byte { return append([]byte(nil), openAPIYAML...) }

// OpenAPIJSON returns the same document as JSON, for generators that read
// only JSON.
func OpenAPIJSON() ([]byte, error) {
	var doc any
	if err := yaml.Unmarshal(openAPIYAML, &doc); err != nil {
		return nil, fmt.Errorf("ledgerapi: openapi.yaml: %w", err)
	}
	return json.Marshal(doc)
}

func (s *server) routeOpenAPI(mux *http.ServeMux) {
	s.routeHandler(mux, http.MethodGet, "/v1/openapi.yaml", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/yaml")
		_, _ = w.Write(openAPIYAML)
	})
	// Converted once per handler: the embedded document never changes.
	doc, err := OpenAPIJSON()
	s.route(mux, http.MethodGet, "/v1/openapi.json", func(*http.Request) (any, error) {
		if err != nil {
			return nil, err
		}
		return json.RawMessage(doc), nil
	})
}
