//go:build tools

// Package tools pins the modules the gateway is built from until every one is imported by real code.
package tools

import (
	_ "github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/labstack/echo/v4"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/redis/go-redis/v9"
	_ "github.com/svix/svix-webhooks/go"
	_ "github.com/tidwall/gjson"
	_ "go.etcd.io/bbolt"
	_ "go.uber.org/goleak"
	_ "go.uber.org/zap"
	_ "go.yaml.in/yaml/v3"
)

