package ledgerapi

import "go.uber.org/zap"

// RegisteredRoutes lists "METHOD /path" for every endpoint NewHandler
// serves, as it registers them.
func RegisteredRoutes() []string {
	s := &server{log: zap.NewNop(), refusals: newRefusalLog(1, 1)}
	s.mux()
	return s.routes
}
