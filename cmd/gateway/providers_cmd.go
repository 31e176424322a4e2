package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/replyonce/gateway/signatures"
)

// providers lists the providers the gateway verifies, or prints a ready source for one.
func (a *App) providers(args []string) error {
	fs := a.flags("providers")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return helpRequested{fs}
		}
		return usageError{err.Error()}
	}
	switch fs.NArg() {
	case 0:
		return listProviders(a.Stdout)
	case 1:
		return providerSnippet(a.Stdout, fs.Arg(0))
	}
	return usageError{"providers: at most one provider name"}
}

func listProviders(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PROVIDER\tSCHEME\tDEFAULT EVENT ID\tHANDSHAKE")
	for _, name := range signatures.Providers() {
		p, err := signatures.Lookup(name)
		if err != nil {
			return err
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", name, p.Scheme, orDash(firstTemplate(p.EventID)), orDash(p.HandshakeNote))
	}
	return tw.Flush()
}

// firstTemplate shortens an event id rule to its first template, at most 60 characters, "+N"
// saying how many fallbacks follow; `gateway providers NAME` prints them all.
func firstTemplate(ts []string) string {
	if len(ts) == 0 {
		return ""
	}
	s := ts[0]
	if r := []rune(s); len(r) > 60 {
		s = string(r[:59]) + "…"
	}
	if len(ts) > 1 {
		s += fmt.Sprintf(" (+%d)", len(ts)-1)
	}
	return s
}

// providerSnippet prints a source block to paste under sources:, with the secret read from an
// environment variable, and where the provider's dashboard shows that secret.
func providerSnippet(w io.Writer, name string) error {
	p, err := signatures.Lookup(name)
	if err != nil {
		return usageError{fmt.Sprintf("providers: %v (gateway providers lists them)", err)}
	}
	env := strings.ToUpper(strings.NewReplacer("-", "_").Replace(name)) + "_WEBHOOK_SECRET"
	fmt.Fprintf(w, "# %s: %s\n", name, p.Scheme)
	fmt.Fprintf(w, "# Secret: %s\n", secretHelp(name))
	fmt.Fprintf(w, "# Timestamp: %s\n", p.Timestamp)
	if p.HandshakeNote != "" {
		fmt.Fprintf(w, "# Handshake answered by the gateway: %s\n", p.HandshakeNote)
	}
	if len(p.EventID) == 0 {
		fmt.Fprintln(w, "# No default event id: set event_id to a template that identifies one event.")
	} else {
		fmt.Fprintf(w, "# Default event id: %s\n", strings.Join(p.EventID, ", then "))
	}
	if p.Split != "" {
		fmt.Fprintf(w, "# Batched deliveries: add split: default for one event per element (id %s).\n", strings.Join(p.SplitEventID, ", then "))
	}
	fmt.Fprintf(w, "sources:\n  %s:\n    provider: %s\n    secrets: [${%s}]\n", name, name, env)
	if p.NeedsURL {
		fmt.Fprintf(w, "    url: https://your-host/hooks/%s   # the URL registered with the provider, exactly\n", name)
	}
	if p.NeedsVerifyToken {
		fmt.Fprintf(w, "    verify_token: ${%s_VERIFY_TOKEN}\n", strings.TrimSuffix(env, "_WEBHOOK_SECRET"))
	}
	if name == "hmac" {
		fmt.Fprintln(w, "    hmac: {header: X-Signature, algorithm: sha256, encoding: hex}")
	}
	if len(p.EventID) == 0 {
		fmt.Fprintln(w, "    event_id: \"{json:id}\"   # adjust")
	}
	fmt.Fprintln(w, "    forward: {url: http://127.0.0.1:9000/events}")
	return nil
}

func secretHelp(name string) string {
	if s, ok := dashboards[name]; ok {
		return s
	}
	return "the webhook's signing secret, in the provider's webhook settings"
}

// dashboards says where each provider shows the secret to put in secrets.
var dashboards = map[string]string{
	"standard-webhooks": "the whsec_… signing secret of the endpoint, from the sender's webhook settings",
	"svix":              "Svix app portal → Endpoints → the endpoint → Signing Secret (whsec_…)",
	"stripe":            "Dashboard → Developers → Webhooks → the endpoint → Signing secret (whsec_…)",
	"github":            "Settings → Webhooks → the hook → Secret (the value you chose)",
	"slack":             "api.slack.com/apps → your app → Basic Information → App Credentials → Signing Secret",
	"shopify":           "Settings → Notifications → Webhooks (the key shown under the list), or the app's client secret",
	"twilio":            "Console → Account → API keys & tokens → Auth Token",
	"gitlab":            "Project → Settings → Webhooks → Secret token (the value you chose)",
	"bitbucket":         "Repository settings → Webhooks → the hook → Secret",
	"intercom":          "Developer Hub → your app → Basic information → Client secret",
	"zendesk":           "Admin Center → Apps and integrations → Webhooks → the webhook → Signing secret → Reveal",
	"nylas":             "the webhook_secret returned when the webhook was created (Dashboard → Notifications)",
	"hubspot":           "Developer account → Apps → your app → Auth → Client secret",
	"linear":            "Settings → API → Webhooks → the webhook → Signing secret",
	"discord":           "Developer Portal → your application → General Information → Public Key (hex)",
	"sendgrid":          "Settings → Mail Settings → Signed Event Webhook → Verification Key",
	"mailgun":           "Sending → Webhooks → HTTP webhook signing key",
	"postmark":          "the user:password you put in the webhook URL (Servers → Webhooks → Basic auth)",
	"paddle":            "Developer Tools → Notifications → the destination → Secret key",
	"square":            "Developer Dashboard → your app → Webhooks → Subscriptions → Signature key",
	"zoom":              "App Marketplace → your app → Feature → Event Subscriptions → Secret Token",
	"meta":              "App Dashboard → App settings → Basic → App secret (verify_token: the value you chose)",
	"telegram":          "the secret_token you passed to setWebhook",
	"msgraph":           "the clientState you set when creating the subscription",
	"lemonsqueezy":      "Settings → Webhooks → the webhook → Signing secret (the value you chose)",
	"calendly":          "the signing_key you passed when creating the webhook subscription",
	"typeform":          "Connect → Webhooks → the webhook → Edit → Secret",
	"pagerduty":         "Integrations → Generic Webhooks (v3) → the subscription → the secret shown once",
	"twitch":            "the secret you passed when creating the EventSub subscription",
	"sentry":            "Settings → Developer Settings → your integration → Client Secret",
	"vercel":            "Team Settings → Webhooks → the webhook → secret (shown once); integrations: Client Secret",
	"coinbase":          "Commerce → Settings → Webhook subscriptions → Show shared secret",
	"helpscout":         "Manage → Apps → Webhooks → Secret Key",
	"front":             "Settings → Developers → your app → Basic information → App secret",
	"dropbox":           "App Console → your app → Settings → App secret",
	"asana":             "the X-Hook-Secret Asana sent in the handshake (the gateway echoes it; copy it from the response)",
	"x":                 "Developer Portal → your app → Keys and tokens → API Key Secret (consumer secret)",
	"hmac":              "whatever the sender calls its signing secret",
	"docusign":          "Admin → Connect → Connect Keys → Add Secret Key (one per key; list them all)",
	"xero":              "developer.xero.com → My Apps → your app → Webhooks → Webhooks key",
	"orb":               "Developers → Webhooks → the endpoint → Signing secret",
	"tiktok":            "developers.tiktok.com → Manage apps → your app → Client secret",
	"box":               "Developer Console → your app → Webhooks → Manage signature keys (primary, then secondary)",
	"mux":               "Settings → Webhooks → the webhook → Show Signing Secret",
	"workos":            "Dashboard → Webhooks → the endpoint → Signing secret",
	"plivo":             "Console → Overview → Account → Auth Token",
	"razorpay":          "Dashboard → Account & Settings → Webhooks → the webhook → Secret (the value you chose)",
	"gocardless":        "Dashboard → Developers → Webhook endpoints → the endpoint → Secret",
	"sanity":            "sanity.io/manage → project → API → Webhooks → the webhook → Secret",
	"contentful":        "Settings → Webhooks → Settings → Request verification → the secret shown once",
	"modern-treasury":   "Developers → Webhooks → the endpoint → Webhook key",
	"pusher":            "Channels → your app → App Keys → secret (one per app key)",
	"terraform":         "Workspace → Settings → Notifications → the configuration → Token (the value you chose)",
	"mongodb-atlas":     "Project → Integrations → Webhook Settings → Webhook Secret",
	"recurly":           "Integrations → Webhooks → the endpoint → Signature secret",
	"replicate":         "GET https://api.replicate.com/v1/webhooks/default/secret (the whsec_… key)",
	"openai":            "platform.openai.com → Settings → Webhooks → the endpoint → Signing secret (whsec_…)",
	"resend":            "Dashboard → Webhooks → the webhook → Signing Secret (whsec_…)",
	"clerk":             "Dashboard → Configure → Webhooks → the endpoint → Signing Secret (whsec_…)",
	"brex":              "GET /v1/webhooks/secrets of the Brex API (list both during rotation)",
	"polar":             "Settings → Webhooks → the endpoint → Secret (polar_whs_…)",
	"worldline":         "Merchant Portal → Developer → Webhooks → the key (list every active key)",
	"okta":              "Workflow → Event Hooks → the hook → Authentication field value (the value you chose)",
	"woocommerce":       "WooCommerce → Settings → Advanced → Webhooks → the webhook → Secret",
	"buildkite":         "Organization Settings → Notification Services → the webhook → Token",
	"clickup":           "the secret returned when the webhook was created (Create Webhook API response)",
	"webex":             "the secret you passed when creating the webhook",
	"heroku":            "the secret you passed to heroku webhooks:add --secret",
	"launchdarkly":      "Integrations → Webhooks → the webhook → Secret (shown when Sign this webhook is on)",
	"frameio":           "Developer → Webhooks → the webhook → Signing secret (shown once)",
	"circleci":          "Project Settings → Webhooks → the webhook → Secret token (the value you chose)",
	"persona":           "Dashboard → Webhooks → the webhook → Webhook secret",
	"customerio":        "Data & Integrations → Reporting webhooks → the webhook → Signing key",
	"airtable":          "macSecretBase64 returned when the webhook was created (base64)",
	"trello":            "trello.com/app-key → your Power-Up → API key → Secret; url: the callbackURL you registered",
	"mandrill":          "Mandrill → Settings → Webhooks → the webhook → Key; url: the webhook URL exactly",
	"webflow":           "the app's Client Secret, or the webhook secret for dashboard-created webhooks",
	"notion":            "the verification_token Notion sent first (the gateway answers 200 and returns it in X-Notion-Verification-Token)",
	"calcom":            "Settings → Developer → Webhooks → the webhook → Secret",
	"checkout":          "Dashboard → Developers → Webhooks → the endpoint → Secret key",
	"alchemy":           "Dashboard → Webhooks → Signing Key",
	"aftership":         "Settings → Webhooks → Webhook secret",
	"airship":           "the secret key shown when the webhook was created",
	"autodesk":          "the hook token you set with the Webhooks API (POST /tokens)",
	"chargify":          "Config → Settings → Site shared key",
	"msteams":           "Teams → the channel → Manage → Apps → Outgoing webhook → the security token shown once (base64)",
	"linkedin":          "Developer Portal → your app → Auth → Client Secret",
	"segment":           "Destination → Webhooks → Settings → Shared Secret",
	"klaviyo":           "Settings → Webhooks → the webhook → Secret key",
	"onfleet":           "Settings → API & Webhooks → Webhook secret (hex)",
	"shippo":            "Settings → Webhooks → the webhook's auth secret",
	"bolt":              "Merchant Dashboard → Developers → API → Signing Secret",
	"airwallex":         "Settings → Developer → Webhooks → the webhook → Secret",
	"jira":              "System → WebHooks → the webhook → Secret",
	"gitea":             "Repository → Settings → Webhooks → the hook → Secret",
	"chargebee":         "the user:password you set under Settings → Webhooks → Protect webhook URL with basic authentication",
	"pipedrive":         "the user:password you set on the webhook (Tools and apps → Webhooks → HTTP Auth)",
	"quickbooks":        "developer.intuit.com → your app → Webhooks → Verifier token",
	"sns":               "the topic ARN you subscribe (no secret: certificates are fetched and pinned)",
	"paypal":            "Developer Dashboard → Apps & Credentials → your app → Webhooks → Webhook ID",
	"plaid":             "Dashboard → Developers → Keys → client_id:secret (used to fetch verification keys)",
	"vonage":            "Dashboard → Settings → Signature secret",
	"monday":            "Developer Center → your app → Basic Information → Signing Secret",
	"telnyx":            "Mission Control → Account Settings → Keys & Credentials → Public Key (base64)",
	"adyen":             "Customer Area → Developers → Webhooks → the webhook → HMAC key (hex)",
	"braintree":         "Control Panel → API → API keys → public_key:private_key",
}
