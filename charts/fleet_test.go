package charts

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// Fleet mode from the chart: the Redis URL in the config, its password
// from a Secret into the env var the config names, in both modes.
func TestFleetValues(t *testing.T) {
	t.Setenv("HOOKPACE_REDIS_PASSWORD", "from-the-secret") // what the pod's env would hold
	for _, mode := range []string{"sidecar", "gateway"} {
		sets := []string{"mode=" + mode, "hookpace.fleet.redis=rediss://redis.hooks.svc:6380/0",
			"hookpace.fleet.passwordSecret=redis-auth", "hookpace.config.fleet.key_prefix=payments"}
		r := render(t, sets...)
		var data string
		var containers []corev1.Container
		if mode == "sidecar" {
			data = get(t, r.configMaps, "hookpace").Data["config.yaml"]
			// The sidecar that the NOTES.txt command injects.
			containers = injected(t, sets...).Spec.Template.Spec.InitContainers
		} else {
			data = get(t, r.secrets, "rel-hookpace").StringData["config.yaml"]
			containers = get(t, r.statefulSets, "rel-hookpace").Spec.Template.Spec.Containers
		}
		var env []string
		for _, c := range containers {
			for _, e := range c.Env {
				if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
					env = append(env, e.Name+"<-"+e.ValueFrom.SecretKeyRef.Name+"/"+e.ValueFrom.SecretKeyRef.Key)
				}
			}
		}
		c := hookpaceConfig(t, data)
		f := c.Fleet
		// The password itself is read by a start from the env var named
		// here, which the pod fills from the Secret (checked below).
		if f.Redis != "rediss://redis.hooks.svc:6380/0" || f.PasswordEnv != "HOOKPACE_REDIS_PASSWORD" || f.KeyPrefix != "payments" {
			t.Errorf("%s: fleet = %+v", mode, f)
		}
		if strings.Contains(data, "from-the-secret") {
			t.Errorf("%s: the password is in the config", mode)
		}
		if len(env) != 1 || env[0] != "HOOKPACE_REDIS_PASSWORD<-redis-auth/redis-password" {
			t.Errorf("%s: secret env %v", mode, env)
		}
	}
	if _, err := helm(t, "template", "rel", chart, "--set", "hookpace.fleet.passwordSecret=x"); err == nil {
		t.Error("a password Secret without a Redis URL rendered")
	}
	r := render(t) // no fleet: nothing of it in the config
	if c := hookpaceConfig(t, get(t, r.configMaps, "hookpace").Data["config.yaml"]); c.Fleet.Enabled() {
		t.Errorf("fleet without values: %+v", c.Fleet)
	}
}

// TestFleetClusterAndSentinel: the chart names a Redis Cluster or a
// Sentinel-managed master as it names one Redis, and refuses two at once.
func TestFleetClusterAndSentinel(t *testing.T) {
	t.Setenv("HOOKPACE_REDIS_PASSWORD", "from-the-secret")
	r := render(t, "mode=gateway", "hookpace.fleet.cluster={r0:6379,r1:6379,r2:6379}", "hookpace.fleet.passwordSecret=redis-auth")
	c := hookpaceConfig(t, get(t, r.secrets, "rel-hookpace").StringData["config.yaml"])
	if strings.Join(c.Fleet.Cluster, ",") != "r0:6379,r1:6379,r2:6379" || c.Fleet.Redis != "" || c.Fleet.PasswordEnv != "HOOKPACE_REDIS_PASSWORD" {
		t.Errorf("cluster: fleet = %+v", c.Fleet)
	}
	r = render(t, "mode=gateway", "hookpace.fleet.sentinel.master=mymaster", "hookpace.fleet.sentinel.addrs={s0:26379,s1:26379}")
	c = hookpaceConfig(t, get(t, r.secrets, "rel-hookpace").StringData["config.yaml"])
	if c.Fleet.SentinelMaster != "mymaster" || len(c.Fleet.SentinelAddrs) != 2 {
		t.Errorf("sentinel: fleet = %+v", c.Fleet)
	}
	if _, err := helm(t, "template", "rel", chart, "--set", "hookpace.fleet.redis=redis://r:6379", "--set", "hookpace.fleet.cluster={r0:6379}"); err == nil ||
		!strings.Contains(err.Error(), "set one of redis, cluster and sentinel") {
		t.Errorf("redis and cluster together: %v", err)
	}
}
