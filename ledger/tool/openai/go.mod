module github.com/replyonce/gateway/ledger/tool/openai

go 1.26.0

replace github.com/replyonce/gateway => ../../..

require (
	github.com/openai/openai-go/v3 v3.102.0
	github.com/replyonce/gateway v0.1.0
	go.uber.org/goleak v1.3.0
)

require (
	github.com/coder/websocket v1.8.15 // indirect
	github.com/goccy/go-json v0.12.0 // indirect
	github.com/gowebpki/jcs v1.0.2 // indirect
	github.com/santhosh-tekuri/jsonschema/v6 v6.0.3 // indirect
	github.com/tidwall/gjson v1.20.4 // indirect
	github.com/tidwall/match v1.1.1 // indirect
	github.com/tidwall/pretty v1.3.0 // indirect
	github.com/tidwall/sjson v1.2.5 // indirect
	go.uber.org/multierr v1.10.0 // indirect
	go.uber.org/zap v1.28.0 // indirect
	go.yaml.in/yaml/v3 v3.0.6 // indirect
	golang.org/x/text v0.42.0 // indirect
)
