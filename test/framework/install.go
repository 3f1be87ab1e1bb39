package framework

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/kube-reclaim/kube-reclaim/internal/ociimage"
	"github.com/kube-reclaim/kube-reclaim/test/cluster"
	"github.com/kube-reclaim/kube-reclaim/test/images"
)

// InstallImage is one build of kube-reclaim's image, as an archive for ctr
// import, and the version its binary prints: what the tests that apply the
// shipped overlay onto real nodes import into them.
type InstallImage struct {
	Tag, Tarball, Version string
	Took                  time.Duration
}

// The images of an install onto real nodes: kube-reclaim's under
// InstallImageRepo (BuildInstallImage), and kube-scheduler's and
// metrics-server's, packed from the cached binaries under the names the
// shipped manifests and the metrics-server manifest of
// test/integration/testdata use.
const (
	InstallImageRepo          = "kube-reclaim.local/kube-reclaim"
	InstallSchedulerImage     = "registry.k8s.io/kube-scheduler:v1.34.4"
	InstallMetricsServerImage = "kube-reclaim.local/metrics-server:v0.7.2"
)

// BuildInstallImages builds kube-reclaim's image as BuildInstallImage does
// (under InstallImageRepo:tag) and packs bins' kube-scheduler and
// metrics-server beside it, all into dir; it returns the build and the
// three archives a real node imports.
func BuildInstallImages(ctx context.Context, root, dir, tag string, plugin []ociimage.File, bins *cluster.Binaries) (InstallImage, []string, error) {
	img, err := BuildInstallImage(ctx, root, dir, InstallImageRepo, tag, plugin)
	if err != nil {
		return InstallImage{}, nil, err
	}
	tarballs := []string{img.Tarball, filepath.Join(dir, "kube-scheduler.oci.tar"), filepath.Join(dir, "metrics-server.oci.tar")}
	if err := images.PackDynamic(bins.Scheduler, "/usr/local/bin/kube-scheduler", InstallSchedulerImage, tarballs[1]); err != nil {
		return InstallImage{}, nil, err
	}
	if err := images.PackDynamic(bins.MetricsServer, "/usr/local/bin/metrics-server", InstallMetricsServerImage, tarballs[2]); err != nil {
		return InstallImage{}, nil, err
	}
	return img, tarballs, nil
}

// MetricsServerManifest is the metrics-server install of
// test/integration/testdata, naming InstallMetricsServerImage.
func MetricsServerManifest(root string) ([]byte, error) {
	ms, err := os.ReadFile(filepath.Join(root, "test", "integration", "testdata", "metrics-server.yaml"))
	if err != nil {
		return nil, err
	}
	return []byte(strings.ReplaceAll(string(ms), "METRICS_SERVER_IMAGE", InstallMetricsServerImage)), nil
}

// BuildInstallImage builds the image of the tree at root under repo:tag, the
// way `make image` does for the host's platform only, into dir. Its
// kube-reclaim-scheduler is plugin, a build made already (the cached one),
// or, when plugin is nil, none: an install that does not run the plugin
// scheduler needs no second build of kube-scheduler.
func BuildInstallImage(ctx context.Context, root, dir, repo, tag string, plugin []ociimage.File) (InstallImage, error) {
	start := time.Now()
	work := filepath.Join(dir, "build")
	idx, err := ociimage.KubeReclaim{RepoRoot: root, WorkDir: work, Version: tag, Platforms: []ociimage.Platform{images.HostPlatform},
		NoPluginScheduler: plugin == nil, PluginSchedulerFiles: plugin}.Build(ctx)
	if err != nil {
		return InstallImage{}, err
	}
	b := InstallImage{Tag: tag, Tarball: filepath.Join(dir, "kube-reclaim.oci.tar")}
	if err := ociimage.WriteTarball(b.Tarball, repo+":"+tag, idx); err != nil {
		return InstallImage{}, err
	}
	bin := filepath.Join(work, images.HostPlatform.OS+"_"+images.HostPlatform.Arch, "kube-reclaim")
	out, err := exec.CommandContext(ctx, bin, "version").Output()
	if err != nil {
		return InstallImage{}, fmt.Errorf("%s version: %w", bin, err)
	}
	b.Version = strings.TrimSpace(string(out))
	b.Took = time.Since(start)
	return b, nil
}

// DeploymentAvailable says whether d's controller has seen its latest spec
// and every wanted replica is updated, available and reported so by the
// Available condition.
func DeploymentAvailable(d *appsv1.Deployment) bool {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	if d.Status.ObservedGeneration < d.Generation || d.Status.AvailableReplicas < want || d.Status.UpdatedReplicas < want {
		return false
	}
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentAvailable {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
