package deploy

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// composeFile is the part of the Compose specification the test reads.
type composeFile struct {
	Services map[string]struct {
		Image       string            `json:"image"`
		Build       any               `json:"build"`
		Environment map[string]string `json:"environment"`
		Ports       []string          `json:"ports"`
		DependsOn   map[string]struct {
			Condition string `json:"condition"`
		} `json:"depends_on"`
		Healthcheck *struct {
			Test []string `json:"test"`
		} `json:"healthcheck"`
	} `json:"services"`
}

// TestCompose checks compose.yaml: every service has a health check and a
// pinned image (or is built here), each chatmem service uses a store that
// is a service of the file and waits until that store is healthy, and
// publishes its port on loopback only.
func TestCompose(t *testing.T) {
	b, err := os.ReadFile("../compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var c composeFile
	if err := yaml.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	pinned := regexp.MustCompile(`^[a-z0-9./-]+:[0-9]+\.[0-9]+(\.[0-9]+)?(-[a-z0-9]+)?$`)
	stores := map[string]bool{}
	for name, s := range c.Services {
		if s.Healthcheck == nil || len(s.Healthcheck.Test) < 2 || s.Healthcheck.Test[0] != "CMD" {
			t.Errorf("service %s: health check %+v, want an exec-form CMD", name, s.Healthcheck)
		}
		if s.Build == nil && !pinned.MatchString(s.Image) {
			t.Errorf("service %s: image %q is not pinned to a version", name, s.Image)
		}
		if !strings.HasPrefix(name, "chatmem") {
			continue
		}
		if len(s.Healthcheck.Test) < 3 || !slices.Equal(s.Healthcheck.Test[:3], []string{"CMD", "/chatmem", "healthcheck"}) {
			t.Errorf("service %s: health check %v, want chatmem healthcheck", name, s.Healthcheck.Test)
		}
		store := s.Environment["CHATMEM_STORE"]
		host := regexp.MustCompile(`^(postgres|redis)://(?:[^@/]*@)?([^:/]+)`).FindStringSubmatch(store)
		if host == nil {
			t.Errorf("service %s: CHATMEM_STORE %q is not a PostgreSQL or Redis URL", name, store)
			continue
		}
		stores[host[1]] = true
		if _, ok := c.Services[host[2]]; !ok {
			t.Errorf("service %s: its store host %s is not a service", name, host[2])
		}
		if d := s.DependsOn[host[2]]; d.Condition != "service_healthy" {
			t.Errorf("service %s: depends on %s with condition %q, want service_healthy", name, host[2], d.Condition)
		}
		if !strings.HasPrefix(s.Environment["CHATMEM_API_KEYS"], "${CHATMEM_API_KEYS:?") {
			t.Errorf("service %s: CHATMEM_API_KEYS = %q, want it required from the environment", name, s.Environment["CHATMEM_API_KEYS"])
		}
		for _, p := range s.Ports {
			if !strings.HasPrefix(p, "127.0.0.1:") {
				t.Errorf("service %s: port %s is published beyond loopback", name, p)
			}
		}
	}
	if !stores["postgres"] || !stores["redis"] {
		t.Errorf("chatmem runs against %v, want PostgreSQL and Redis", stores)
	}
}

// TestDockerfile checks the final stage of the Dockerfile: FROM scratch,
// a numeric non-root user, the /data volume, port 8080, and a HEALTHCHECK
// that runs chatmem healthcheck. .ci/container builds and runs it.
func TestDockerfile(t *testing.T) {
	b, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	src := string(b)
	final := src[strings.LastIndex(src, "\nFROM ")+1:]
	for _, want := range []string{
		"FROM scratch\n",
		"\nUSER 65532:65532\n",
		"\nVOLUME [\"/data\"]\n",
		"\nEXPOSE 8080\n",
		"CHATMEM_ADDR=0.0.0.0:8080",
		"CHATMEM_DATA_DIR=/data",
		`CMD ["/chatmem", "healthcheck", "--url", "http://127.0.0.1:8080/healthz"`,
		"\nENTRYPOINT [\"/chatmem\"]\n",
	} {
		if !strings.Contains(final, want) {
			t.Errorf("the Dockerfile's final stage lacks %q", want)
		}
	}
	if !strings.Contains(src, "CGO_ENABLED=0 go build") {
		t.Error("the Dockerfile does not build a static binary (CGO_ENABLED=0)")
	}
}
