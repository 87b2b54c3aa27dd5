package deploy

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// manifests are the decoded documents of kubernetes/*.yaml.
type manifests struct {
	deployments []*appsv1.Deployment
	services    []*corev1.Service
	pdbs        []*policyv1.PodDisruptionBudget
	hpas        []*autoscalingv2.HorizontalPodAutoscaler
}

var docSep = regexp.MustCompile(`(?m)^---\s*$`)

// load decodes every document of every file in dir strictly: an unknown
// field, a duplicate field or a value of the wrong type fails.
func load(t *testing.T, dir string) manifests {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in %s (%v)", dir, err)
	}
	var m manifests
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range docSep.Split(string(b), -1) {
			if strings.TrimSpace(stripComments(doc)) == "" {
				continue
			}
			if err := m.add([]byte(doc)); err != nil {
				t.Errorf("%s, document %d: %v", f, i+1, err)
			}
		}
	}
	return m
}

func stripComments(doc string) string {
	var b strings.Builder
	for l := range strings.Lines(doc) {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			b.WriteString(l)
		}
	}
	return b.String()
}

func (m *manifests) add(doc []byte) error {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return err
	}
	var into any
	switch tm.APIVersion + " " + tm.Kind {
	case "apps/v1 Deployment":
		d := &appsv1.Deployment{}
		m.deployments, into = append(m.deployments, d), d
	case "v1 Service":
		s := &corev1.Service{}
		m.services, into = append(m.services, s), s
	case "policy/v1 PodDisruptionBudget":
		p := &policyv1.PodDisruptionBudget{}
		m.pdbs, into = append(m.pdbs, p), p
	case "autoscaling/v2 HorizontalPodAutoscaler":
		h := &autoscalingv2.HorizontalPodAutoscaler{}
		m.hpas, into = append(m.hpas, h), h
	default:
		return fmt.Errorf("unexpected apiVersion %q kind %q", tm.APIVersion, tm.Kind)
	}
	// As the API server decodes: field names match case-sensitively
	// (encoding/json would take readOnlyRootFileSystem for
	// readOnlyRootFilesystem), unknown and duplicate fields are errors.
	j, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return err
	}
	strict, err := kjson.UnmarshalStrict(j, into)
	if err != nil {
		return err
	}
	return errors.Join(strict...)
}

// TestStrictDecoding checks that the strict decoding this test relies on
// does refuse what kubectl would warn about or drop.
func TestStrictDecoding(t *testing.T) {
	for _, doc := range []string{
		"apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {selectr: {a: b}}\n",            // misspelt field
		"apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {ports: [{port: eighty}]}\n",    // wrong type
		"apiVersion: v1\nkind: Service\nmetadata: {name: x, name: y}\n",                            // duplicate field
		"apiVersion: apps/v1beta1\nkind: Deployment\nmetadata: {name: x}\n",                        // old API
		"apiVersion: policy/v1\nkind: PodDisruptionBudget\nspec: {minAvailable: 1, maxAvaible: 1}", // typo
		"apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {Selector: {a: b}}\n",           // wrong case
	} {
		var m manifests
		if err := m.add([]byte(doc)); err == nil {
			t.Errorf("decoded without error:\n%s", doc)
		}
	}
}

func TestManifests(t *testing.T) {
	m := load(t, "kubernetes")
	if len(m.deployments) != 1 || len(m.services) != 1 || len(m.pdbs) != 1 || len(m.hpas) != 1 {
		t.Fatalf("manifests: %d Deployments, %d Services, %d PodDisruptionBudgets, %d HorizontalPodAutoscalers; want one of each",
			len(m.deployments), len(m.services), len(m.pdbs), len(m.hpas))
	}
	d := m.deployments[0]
	pod := d.Spec.Template.Spec
	podLabels := labels.Set(d.Spec.Template.Labels)
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil || sel.Empty() || !sel.Matches(podLabels) {
		t.Errorf("Deployment selector %v does not match its pods' labels %v (%v)", d.Spec.Selector, podLabels, err)
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("Deployment has %d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]

	t.Run("probes", func(t *testing.T) {
		probe := func(what string, p *corev1.Probe, path string) {
			if p == nil || p.HTTPGet == nil {
				t.Errorf("%s probe: %+v, want GET %s", what, p, path)
				return
			}
			if p.HTTPGet.Path != path {
				t.Errorf("%s probe path = %s, want %s", what, p.HTTPGet.Path, path)
			}
			if port := containerPort(c, p.HTTPGet.Port.String()); port != 8080 {
				t.Errorf("%s probe port %s is container port %d, want 8080", what, p.HTTPGet.Port.String(), port)
			}
		}
		probe("readiness", c.ReadinessProbe, "/readyz")
		probe("liveness", c.LivenessProbe, "/healthz")
	})

	t.Run("listens on 8080 on every interface", func(t *testing.T) {
		if got := envValue(c, "CHATMEM_ADDR"); got != "0.0.0.0:8080" {
			t.Errorf("CHATMEM_ADDR = %q, want 0.0.0.0:8080", got)
		}
		if !slices.Equal(c.Args, []string{"serve"}) || len(c.Command) != 0 {
			t.Errorf("command %v args %v, want the image's entrypoint with args [serve]", c.Command, c.Args)
		}
	})

	t.Run("secrets", func(t *testing.T) {
		for env, key := range map[string]string{"CHATMEM_API_KEYS": "api-keys", "CHATMEM_STORE": "store-url"} {
			ref := secretRef(c, env)
			if ref == nil || ref.Name != "chatmem" || ref.Key != key || (ref.Optional != nil && *ref.Optional) {
				t.Errorf("%s comes from %+v, want the required key %s of Secret chatmem", env, ref, key)
			}
		}
		for _, e := range c.Env {
			if e.Value != "" && regexp.MustCompile(`(?i)key|secret|password|token|store`).MatchString(e.Name) {
				t.Errorf("%s is a literal in the manifest, want a secretKeyRef", e.Name)
			}
		}
		if envValue(c, "CHATMEM_INSECURE") != "" {
			t.Error("CHATMEM_INSECURE is set: the Deployment must use API keys")
		}
	})

	t.Run("security", func(t *testing.T) {
		psc, sc := pod.SecurityContext, c.SecurityContext
		if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0 {
			t.Errorf("pod securityContext %+v: want runAsNonRoot and a non-zero runAsUser", psc)
		}
		if psc != nil && (psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault) {
			t.Errorf("pod seccompProfile %+v, want RuntimeDefault", psc.SeccompProfile)
		}
		if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			t.Errorf("container securityContext %+v: want readOnlyRootFilesystem", sc)
		} else if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
			t.Errorf("container securityContext %+v: want allowPrivilegeEscalation false and every capability dropped", sc)
		}
		if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
			t.Error("the pod mounts a service account token it never uses")
		}
	})

	t.Run("resources", func(t *testing.T) {
		req := c.Resources.Requests
		if req.Cpu().IsZero() || req.Memory().IsZero() {
			t.Errorf("requests %v: want cpu and memory", req)
		}
		if lim := c.Resources.Limits.Memory(); !lim.IsZero() && lim.Cmp(*req.Memory()) < 0 {
			t.Errorf("memory limit %v below the request %v", lim, req.Memory())
		}
		if g := pod.TerminationGracePeriodSeconds; g == nil || *g <= 30 {
			t.Errorf("terminationGracePeriodSeconds %v: want more than serve's 30s shutdown timeout", g)
		}
	})

	t.Run("service", func(t *testing.T) {
		s := m.services[0]
		if !labels.SelectorFromSet(s.Spec.Selector).Matches(podLabels) || len(s.Spec.Selector) == 0 {
			t.Errorf("Service selector %v does not match the pods' labels %v", s.Spec.Selector, podLabels)
		}
		for _, p := range s.Spec.Ports {
			if containerPort(c, p.TargetPort.String()) != 8080 {
				t.Errorf("Service port %d targets %s, not the container's port 8080", p.Port, p.TargetPort.String())
			}
		}
	})

	t.Run("disruption budget and autoscaler", func(t *testing.T) {
		p := m.pdbs[0]
		ps, err := metav1.LabelSelectorAsSelector(p.Spec.Selector)
		if err != nil || ps.Empty() || !ps.Matches(podLabels) {
			t.Errorf("PodDisruptionBudget selector %v does not match the pods (%v)", p.Spec.Selector, err)
		}
		h := m.hpas[0]
		ref := h.Spec.ScaleTargetRef
		if ref.Kind != "Deployment" || ref.Name != d.Name || ref.APIVersion != "apps/v1" {
			t.Errorf("HorizontalPodAutoscaler scales %+v, want Deployment %s", ref, d.Name)
		}
		if p.Spec.MinAvailable == nil || h.Spec.MinReplicas == nil || int32(p.Spec.MinAvailable.IntValue()) >= *h.Spec.MinReplicas {
			t.Errorf("PodDisruptionBudget minAvailable %v with at least %v replicas: a drain could never evict one", p.Spec.MinAvailable, h.Spec.MinReplicas)
		}
		if d.Spec.Replicas == nil || *d.Spec.Replicas < *h.Spec.MinReplicas || h.Spec.MaxReplicas < *h.Spec.MinReplicas {
			t.Errorf("replicas %v, autoscaler %v to %d: inconsistent", d.Spec.Replicas, *h.Spec.MinReplicas, h.Spec.MaxReplicas)
		}
	})

	t.Run("SQLite is one replica, and the manifests say so", func(t *testing.T) {
		for _, f := range []string{"deployment.yaml", "hpa.yaml", "pdb.yaml"} {
			b, err := os.ReadFile(filepath.Join("kubernetes", f))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(b, []byte("SQLite")) || !bytes.Contains(b, []byte("one replica")) {
				t.Errorf("%s does not say that the SQLite default runs one replica only", f)
			}
		}
	})
}

// containerPort resolves a probe's or Service's port (a number or a name)
// to the container's port number; 0 if the container has no such port.
func containerPort(c corev1.Container, port string) int32 {
	for _, p := range c.Ports {
		if p.Name == port || fmt.Sprint(p.ContainerPort) == port {
			return p.ContainerPort
		}
	}
	return 0
}

func envValue(c corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

func secretRef(c corev1.Container, name string) *corev1.SecretKeySelector {
	for _, e := range c.Env {
		if e.Name == name && e.ValueFrom != nil {
			return e.ValueFrom.SecretKeyRef
		}
	}
	return nil
}
