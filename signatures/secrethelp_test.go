package signatures

import "testing"

// Every provider says where its dashboard shows the secret: `gateway
// providers NAME` prints it above the source it suggests, and a generic
// "in the provider's settings" leaves the user searching.
func TestEveryProviderSaysWhereItsSecretIs(t *testing.T) {
	for _, name := range Providers() {
		p, err := Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := dashboards[name]; !ok || p.Secret == "" {
			t.Errorf("%s: no entry in dashboards (Lookup gives %q)", name, p.Secret)
		}
	}
}
