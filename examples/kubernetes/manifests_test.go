package kubernetes

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// manifest is one file's objects, by kind.
type manifest struct {
	file       string
	secret     *corev1.Secret
	configMap  *corev1.ConfigMap
	deployment *appsv1.Deployment
	service    *corev1.Service
	pdb        *policyv1.PodDisruptionBudget
	hpa        *autoscalingv2.HorizontalPodAutoscaler
}

// decode reads every document of file strictly: an unknown or repeated
// field, an unknown kind or a value of the wrong type fails, as the API
// server's strict field validation would.
func decode(t *testing.T, file string) manifest {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, appsv1.AddToScheme, policyv1.AddToScheme, autoscalingv2.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	codec := serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	m := manifest{file: file}
	reader := utilyaml.NewYAMLReader(bufioReader(raw))
	for {
		doc, err := reader.Read()
		if err != nil {
			break // io.EOF: every document read
		}
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			continue
		}
		obj, gvk, err := codec.Decode(doc, nil, nil)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		switch o := obj.(type) {
		case *corev1.Secret:
			m.secret = o
		case *corev1.ConfigMap:
			m.configMap = o
		case *appsv1.Deployment:
			m.deployment = o
		case *corev1.Service:
			m.service = o
		case *policyv1.PodDisruptionBudget:
			m.pdb = o
		case *autoscalingv2.HorizontalPodAutoscaler:
			m.hpa = o
		default:
			t.Fatalf("%s: unexpected %s", file, gvk)
		}
	}
	if m.secret == nil || m.configMap == nil || m.deployment == nil || m.service == nil || m.pdb == nil || m.hpa == nil {
		t.Fatalf("%s: want a Secret, a ConfigMap, a Deployment, a Service, a PodDisruptionBudget and a HorizontalPodAutoscaler", file)
	}
	return m
}

func manifests(t *testing.T) []string {
	files, err := filepath.Glob("*.yaml")
	if err != nil || len(files) < 2 {
		t.Fatalf("manifests: %v, %v", files, err)
	}
	return files
}

// Each manifest holds what a production Deployment needs, and its parts
// refer to each other correctly.
func TestManifests(t *testing.T) {
	for _, file := range manifests(t) {
		t.Run(file, func(t *testing.T) {
			m := decode(t, file)
			d := m.deployment
			pod := d.Spec.Template
			sel, err := metav1LabelSelector(d)
			if err != nil {
				t.Fatal(err)
			}
			if !sel.Matches(labels.Set(pod.Labels)) {
				t.Errorf("the Deployment's selector does not match its pods")
			}
			if len(pod.Spec.Containers) != 1 {
				t.Fatalf("%d containers, want 1", len(pod.Spec.Containers))
			}
			c := pod.Spec.Containers[0]

			// Probes on the admin port: readiness is /readyz (the store
			// reachable), liveness /healthz (the process up).
			admin := containerPort(c, "admin")
			if admin != 8081 {
				t.Errorf("admin port %d, want 8081", admin)
			}
			for name, p := range map[string]*corev1.Probe{"/readyz": c.ReadinessProbe, "/healthz": c.LivenessProbe} {
				if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != name || p.HTTPGet.Port.String() != "admin" {
					t.Errorf("probe %s: %+v", name, p)
				}
			}
			// The grace period covers the preStop pause and the shutdown
			// grace in the config.
			if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Sleep == nil {
				t.Fatal("no preStop sleep")
			}
			pause := c.Lifecycle.PreStop.Sleep.Seconds
			grace := shutdownGrace(t, m.configMap.Data["gateway.yaml"])
			if g := pod.Spec.TerminationGracePeriodSeconds; g == nil || *g <= pause+grace {
				t.Errorf("terminationGracePeriodSeconds does not cover preStop %d s + shutdown_grace %d s", pause, grace)
			}
			// Non-root, read-only root filesystem, no privileges.
			psc, sc := pod.Spec.SecurityContext, c.SecurityContext
			if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot {
				t.Error("the pod does not require a non-root user")
			}
			if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
				sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
				t.Errorf("container security context %+v", sc)
			}
			// Resources: a CPU request for the autoscaler, a memory limit.
			if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
				t.Errorf("resources %+v", c.Resources)
			}
			// The config comes from the ConfigMap, its variables from the
			// Secret.
			if len(c.EnvFrom) != 1 || c.EnvFrom[0].SecretRef == nil || c.EnvFrom[0].SecretRef.Name != m.secret.Name {
				t.Errorf("envFrom %+v, want the Secret %s", c.EnvFrom, m.secret.Name)
			}
			configPath := ""
			for i, a := range c.Args {
				if a == "--config" && i+1 < len(c.Args) {
					configPath = c.Args[i+1]
				}
			}
			if !mountsConfigMap(pod.Spec, c, m.configMap.Name, configPath) {
				t.Errorf("--config %s is not the ConfigMap %s's gateway.yaml", configPath, m.configMap.Name)
			}

			// The Service, the budget and the autoscaler select these pods.
			if !labels.SelectorFromSet(m.service.Spec.Selector).Matches(labels.Set(pod.Labels)) ||
				len(m.service.Spec.Ports) == 0 || m.service.Spec.Ports[0].TargetPort.String() != "webhooks" ||
				containerPort(c, "webhooks") != 8080 {
				t.Errorf("the Service does not send webhooks to the pods' port 8080")
			}
			pdbSel, err := metav1Selector(m.pdb.Spec.Selector)
			if err != nil || !pdbSel.Matches(labels.Set(pod.Labels)) {
				t.Errorf("the PodDisruptionBudget does not select the pods (%v)", err)
			}
			if m.pdb.Spec.MaxUnavailable == nil && m.pdb.Spec.MinAvailable == nil {
				t.Error("the PodDisruptionBudget sets no budget")
			}
			h := m.hpa.Spec
			if h.ScaleTargetRef.Kind != "Deployment" || h.ScaleTargetRef.Name != d.Name {
				t.Errorf("the autoscaler scales %s %s", h.ScaleTargetRef.Kind, h.ScaleTargetRef.Name)
			}
			cpu := false
			for _, metric := range h.Metrics {
				if metric.Type == autoscalingv2.ResourceMetricSourceType && metric.Resource.Name == corev1.ResourceCPU {
					cpu = true
				}
			}
			if !cpu || h.MinReplicas == nil || *h.MinReplicas < 2 {
				t.Errorf("the autoscaler should scale on CPU from at least 2 replicas: %+v", h)
			}
		})
	}
}

// The config each manifest embeds passes `gateway check` with exactly
// the Secret's variables (a variable the Secret lacks fails it), and
// names the store the file is about.
func TestManifestConfigsPassCheck(t *testing.T) {
	gateway := filepath.Join(t.TempDir(), "gateway")
	build := exec.Command("go", "build", "-o", gateway, "./cmd/gateway")
	build.Dir = "../.."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the gateway: %v\n%s", err, out)
	}
	for _, file := range manifests(t) {
		t.Run(file, func(t *testing.T) {
			m := decode(t, file)
			config := filepath.Join(t.TempDir(), "gateway.yaml")
			if err := os.WriteFile(config, []byte(m.configMap.Data["gateway.yaml"]), 0o600); err != nil {
				t.Fatal(err)
			}
			check := exec.Command(gateway, "check", "--config", config)
			check.Env = []string{"PATH=" + os.Getenv("PATH")}
			for k, v := range m.secret.StringData {
				check.Env = append(check.Env, k+"="+v)
			}
			out, err := check.CombinedOutput()
			if err != nil {
				t.Fatalf("gateway check: %v\n%s", err, out)
			}
			store := strings.TrimSuffix(file, ".yaml")
			if !strings.Contains(string(out), "store "+store) {
				t.Errorf("gateway check does not name the %s store:\n%s", store, out)
			}
			t.Logf("%s", out)
		})
	}
}

var graceRE = regexp.MustCompile(`(?m)^\s*shutdown_grace:\s*(\d+)s\b`)

// shutdownGrace reads server.shutdown_grace (whole seconds) from a
// config, 30 when it is not set.
func shutdownGrace(t *testing.T, config string) int64 {
	m := graceRE.FindStringSubmatch(config)
	if m == nil {
		return 30
	}
	s, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func bufioReader(raw []byte) *bufio.Reader { return bufio.NewReader(bytes.NewReader(raw)) }

// stripComments drops whole-line comments, to tell a document that is
// only a comment (a file's header) from one with content.
func stripComments(doc []byte) []byte {
	var out [][]byte
	for _, line := range bytes.Split(doc, []byte("\n")) {
		if !bytes.HasPrefix(bytes.TrimSpace(line), []byte("#")) {
			out = append(out, line)
		}
	}
	return bytes.Join(out, []byte("\n"))
}

func metav1LabelSelector(d *appsv1.Deployment) (labels.Selector, error) {
	return metav1Selector(d.Spec.Selector)
}

func metav1Selector(s *metav1.LabelSelector) (labels.Selector, error) {
	if s == nil {
		return labels.Nothing(), nil
	}
	return metav1.LabelSelectorAsSelector(s)
}

func containerPort(c corev1.Container, name string) int32 {
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	return 0
}

// mountsConfigMap reports whether path is the key "gateway.yaml" of the
// ConfigMap name, mounted in the container.
func mountsConfigMap(pod corev1.PodSpec, c corev1.Container, name, path string) bool {
	for _, v := range pod.Volumes {
		if v.ConfigMap == nil || v.ConfigMap.Name != name {
			continue
		}
		for _, vm := range c.VolumeMounts {
			if vm.Name == v.Name && filepath.Join(vm.MountPath, "gateway.yaml") == path {
				return true
			}
		}
	}
	return false
}
