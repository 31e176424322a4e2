package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/replyonce/gateway/cmd/gateway/internal/server"
)

// eventsRejected prints the requests the instance at --admin refused for a
// source, newest first.
func (a *App) eventsRejected(ctx context.Context, args []string) error {
	var f ledgerFlags
	fs := a.flags("events rejected")
	adminFlags(fs, &f)
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageError{fmt.Sprintf("events rejected: takes SOURCE\n\n%s", eventsUsage)}
	}
	base, token, err := a.adminTarget(f)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(base, "/")+server.RejectedPath+"?source="+url.QueryEscape(pos[0]), nil)
	if err != nil {
		return usageError{"--admin: " + err.Error()}
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := (&http.Client{Timeout: f.timeout}).Do(req)
	if err != nil {
		return fmt.Errorf("events rejected: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("events rejected: the admin API answered %s", resp.Status)
	}
	var out server.RejectedJSON
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return fmt.Errorf("events rejected: %w", err)
	}
	if f.json {
		return a.printJSON(out)
	}
	fmt.Fprintf(a.Stdout, "%d request(s) refused for %s by this instance, newest first (signature and credential values redacted):\n", len(out.Rejected), printable(out.Source))
	tw := tabwriter.NewWriter(a.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "AT\tSTATUS\tREASON\tREMOTE\tMETHOD\tBYTES\tHEADERS\tBODY")
	for _, r := range out.Rejected {
		var hs []string
		for k, vs := range r.Header {
			hs = append(hs, k+": "+strings.Join(vs, ","))
		}
		sort.Strings(hs)
		body := string(r.Body)
		if !utf8.ValidString(body) {
			body = fmt.Sprintf("(%d bytes, not text)", len(r.Body))
		} else if len(body) > 60 {
			body = strings.ToValidUTF8(body[:60], "") + "…"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%d\t%s\t%s\n", r.At.UTC().Format(time.RFC3339), r.Status, printable(r.Reason), printable(r.Remote),
			printable(r.Method), r.BodySize, printable(strings.Join(hs, "; ")), printable(body))
	}
	return tw.Flush()
}
