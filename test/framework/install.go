package framework

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/kube-reclaim/kube-reclaim/internal/ociimage"
	"github.com/kube-reclaim/kube-reclaim/test/images"
)

// InstallImage is one build of kube-reclaim's image, as an archive for ctr
// import, and the version its binary prints: what the tests that apply the
// shipped overlay onto real nodes import into them.
type InstallImage struct {
	Tag, Tarball, Version string
	Took                  time.Duration
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
