// Command image writes the operator-host container images, the static host and the bundled plugins, as reproducible OCI image layouts and OCI archives.
//
// Every input that could vary between two builds of one commit is fixed: entries are sorted,
// every timestamp is the -epoch (the commit time), owners are numeric, and nothing is read from
// the environment. So the same binary, plugins and flags always give the same digests.
package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/google/go-containerregistry/pkg/v1/validate"
)

const (
	// The host runs as this uid:gid (distroless' "nonroot"), never as root.
	nonroot = 65532
	// Where the Deployment mounts an emptyDir for the compile cache (the root is read-only).
	cacheDir = "/var/cache/operator-host"
	// Where the plugins are, in the plugins image and (mounted from it) in the host's pod.
	pluginsDir = "/plugins"
)

// entry is one file or directory of a layer.
type entry struct {
	name     string // path in the image, without a leading slash
	mode     int64
	uid, gid int
	data     []byte // nil for a directory
}

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

func main() {
	var plugins stringList
	binary := flag.String("binary", "", "the static operator-host binary")
	flag.Var(&plugins, "plugin", "a plugin component (.wasm) for the plugins image; repeat for each")
	out := flag.String("out", "", "output directory")
	version := flag.String("version", "", "image tag (the workspace version)")
	revision := flag.String("revision", "", "the commit the images are built from")
	source := flag.String("source", "", "URL of the source repository (label omitted when empty)")
	epoch := flag.Int64("epoch", -1, "timestamp of every file and of the images, in seconds since 1970 (SOURCE_DATE_EPOCH)")
	registry := flag.String("registry", "localhost", "registry part of the references")
	flag.Parse()
	if *binary == "" || len(plugins) == 0 || *out == "" || *version == "" || *revision == "" || *epoch < 0 {
		fmt.Fprintln(os.Stderr, "usage: image -binary FILE -plugin FILE... -out DIR -version V -revision SHA -epoch SECONDS [-source URL] [-registry HOST]")
		os.Exit(2)
	}
	b := builder{
		out:      *out,
		version:  *version,
		revision: *revision,
		source:   *source,
		created:  time.Unix(*epoch, 0).UTC(),
		registry: *registry,
	}
	if err := b.run(*binary, plugins); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

// builder holds what both images share.
type builder struct {
	out, version, revision, source, registry string
	created                                  time.Time
}

func (b builder) run(binary string, plugins []string) error {
	host, err := b.hostEntries(binary)
	if err != nil {
		return err
	}
	hostCfg := b.config("operator-host", "A Kubernetes operator host whose reconcilers are sandboxed WebAssembly components.")
	hostCfg.Config.User = fmt.Sprintf("%d:%d", nonroot, nonroot)
	hostCfg.Config.Entrypoint = []string{"/operator-host"}
	hostCfg.Config.Cmd = []string{"run", "--plugins", pluginsDir, "--metrics-addr", "0.0.0.0:8080"}
	hostCfg.Config.Env = []string{"HOME=/nonexistent", "OPERATOR_HOST_CACHE_DIR=" + cacheDir}
	hostCfg.Config.WorkingDir = "/"
	hostCfg.Config.ExposedPorts = map[string]struct{}{"8080/tcp": {}}
	if err := b.write("operator-host", hostCfg, host); err != nil {
		return err
	}

	bundled, err := b.pluginEntries(plugins)
	if err != nil {
		return err
	}
	pluginsCfg := b.config("operator-host-plugins", "The bundled operator-host plugins as files under "+pluginsDir+", for an image volume.")
	return b.write("operator-host-plugins", pluginsCfg, bundled)
}

// hostEntries is the host image's one layer: the binary, passwd and group files naming the
// nonroot user, and the cache directory (owned by that user, for a writable root filesystem
// without the emptyDir).
func (b builder) hostEntries(binary string) ([]entry, error) {
	data, err := os.ReadFile(binary)
	if err != nil {
		return nil, fmt.Errorf("reading the host binary: %w", err)
	}
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/nonexistent:/sbin/nologin\n", nonroot, nonroot)
	group := fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", nonroot)
	return []entry{
		{name: "etc/", mode: 0o755},
		{name: "etc/group", mode: 0o644, data: []byte(group)},
		{name: "etc/passwd", mode: 0o644, data: []byte(passwd)},
		{name: "operator-host", mode: 0o555, data: data},
		{name: "var/", mode: 0o755},
		{name: "var/cache/", mode: 0o755},
		{name: strings.TrimPrefix(cacheDir, "/") + "/", mode: 0o755, uid: nonroot, gid: nonroot},
	}, nil
}

// pluginEntries is the plugins image's one layer: each plugin, readable by any uid.
func (b builder) pluginEntries(plugins []string) ([]entry, error) {
	dir := strings.TrimPrefix(pluginsDir, "/") + "/"
	entries := []entry{{name: dir, mode: 0o755}}
	seen := map[string]bool{}
	for _, p := range plugins {
		name := filepath.Base(p)
		if !strings.HasSuffix(name, ".wasm") {
			return nil, fmt.Errorf("plugin %s: not a .wasm file", p)
		}
		if seen[name] {
			return nil, fmt.Errorf("plugin %s: two plugins named %s", p, name)
		}
		seen[name] = true
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("reading plugin: %w", err)
		}
		entries = append(entries, entry{name: dir + name, mode: 0o444, data: data})
	}
	return entries, nil
}

// config is the image configuration both images start from: platform, creation time, labels.
func (b builder) config(title, description string) *v1.ConfigFile {
	labels := map[string]string{
		"org.opencontainers.image.title":       title,
		"org.opencontainers.image.description": description,
		"org.opencontainers.image.version":     b.version,
		"org.opencontainers.image.revision":    b.revision,
		"org.opencontainers.image.created":     b.created.Format(time.RFC3339),
		"org.opencontainers.image.licenses":    "Apache-2.0",
	}
	if b.source != "" {
		labels["org.opencontainers.image.source"] = b.source
	}
	return &v1.ConfigFile{
		Architecture: "amd64",
		OS:           "linux",
		Created:      v1.Time{Time: b.created},
		Config:       v1.Config{Labels: labels},
		RootFS:       v1.RootFS{Type: "layers"},
	}
}

// write builds the image of one layer, writes it as the OCI layout <out>/<name> and the OCI
// archive <out>/<name>.oci.tar, checks what it wrote, and prints reference@digest.
func (b builder) write(name string, cfg *v1.ConfigFile, entries []entry) error {
	ref := fmt.Sprintf("%s/%s:%s", b.registry, name, b.version)
	img, err := b.image(cfg, entries)
	if err != nil {
		return fmt.Errorf("%s: %w", ref, err)
	}
	digest, err := img.Digest()
	if err != nil {
		return fmt.Errorf("%s: digest: %w", ref, err)
	}
	dir := filepath.Join(b.out, name)
	tmp := dir + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return fmt.Errorf("%s: clearing %s: %w", ref, tmp, err)
	}
	if err := writeLayout(tmp, img, v1.Descriptor{
		Platform: &v1.Platform{OS: cfg.OS, Architecture: cfg.Architecture},
		Annotations: map[string]string{
			// containerd (ctr images import) names the image after the first, Docker and
			// skopeo take the tag from the second.
			"io.containerd.image.name":          ref,
			"org.opencontainers.image.ref.name": b.version,
		},
	}); err != nil {
		return fmt.Errorf("%s: writing the OCI layout: %w", ref, err)
	}
	if err := check(tmp); err != nil {
		return fmt.Errorf("%s: checking the OCI layout: %w", ref, err)
	}
	if err := archive(tmp, dir+".oci.tar", b.created); err != nil {
		return fmt.Errorf("%s: writing the OCI archive: %w", ref, err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("%s: replacing %s: %w", ref, dir, err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return fmt.Errorf("%s: replacing %s: %w", ref, dir, err)
	}
	fmt.Printf("%s@%s\n", ref, digest)
	return nil
}

// writeLayout writes img as the OCI layout dir, its index.json holding the one descriptor desc
// completed with img's media type, digest and size (and no artifactType: it is an image).
func writeLayout(dir string, img v1.Image, desc v1.Descriptor) error {
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	if err := lp.WriteImage(img); err != nil {
		return err
	}
	if desc.MediaType, err = img.MediaType(); err != nil {
		return err
	}
	if desc.Digest, err = img.Digest(); err != nil {
		return err
	}
	if desc.Size, err = img.Size(); err != nil {
		return err
	}
	if err := lp.AppendDescriptor(desc); err != nil {
		return err
	}
	// Layers are written as private temporary files: make every blob as readable as the rest.
	blobs, err := filepath.Glob(filepath.Join(dir, "blobs", "*", "*"))
	if err != nil {
		return err
	}
	for _, blob := range blobs {
		if err := os.Chmod(blob, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// image is an OCI image of cfg and one gzipped layer of entries.
func (b builder) image(cfg *v1.ConfigFile, entries []entry) (v1.Image, error) {
	data, err := layerTar(entries, b.created)
	if err != nil {
		return nil, fmt.Errorf("building the layer: %w", err)
	}
	layer, err := tarball.LayerFromOpener(
		func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil },
		tarball.WithMediaType(types.OCILayer),
		tarball.WithCompressionLevel(gzip.BestCompression),
		tarball.WithCompressedCaching,
	)
	if err != nil {
		return nil, fmt.Errorf("compressing the layer: %w", err)
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.ConfigFile(img, cfg)
	if err != nil {
		return nil, fmt.Errorf("setting the config: %w", err)
	}
	img, err = mutate.Append(img, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History: v1.History{
			Created:   v1.Time{Time: b.created},
			CreatedBy: "deploy/image/build.sh",
			Comment:   "files: " + names(entries),
		},
	})
	if err != nil {
		return nil, fmt.Errorf("adding the layer: %w", err)
	}
	return img, nil
}

// layerTar is a tar of entries in name order, every one stamped with mtime and no user names.
func layerTar(entries []entry, mtime time.Time) ([]byte, error) {
	sorted := append([]entry(nil), entries...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].name < sorted[j].name })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range sorted {
		hdr := &tar.Header{
			Name:    e.name,
			Mode:    e.mode,
			Uid:     e.uid,
			Gid:     e.gid,
			ModTime: mtime,
			Format:  tar.FormatUSTAR,
		}
		if e.data == nil {
			hdr.Typeflag = tar.TypeDir
		} else {
			hdr.Typeflag = tar.TypeReg
			hdr.Size = int64(len(e.data))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("tar header of %s: %w", e.name, err)
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, fmt.Errorf("tar data of %s: %w", e.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("closing the tar: %w", err)
	}
	return buf.Bytes(), nil
}

// check reads the layout back and validates every image in it: digests, sizes, diff IDs and
// the config's agreement with the layers.
func check(dir string) error {
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return fmt.Errorf("reading it back: %w", err)
	}
	if err := validate.Index(idx); err != nil {
		return fmt.Errorf("validating: %w", err)
	}
	return nil
}

// archive writes the layout dir as a tar (the OCI archive `ctr images import` and
// `skopeo copy oci-archive:` read), entries in name order, stamped with mtime, owned by root.
func archive(dir, dst string, mtime time.Time) (err error) {
	tmp := dst + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("creating %s: %w", tmp, err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	tw := tar.NewWriter(f)
	// WalkDir visits in lexical order, so the archive does not depend on the file system.
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		name := filepath.ToSlash(rel)
		hdr := &tar.Header{Name: name, Mode: 0o644, ModTime: mtime, Format: tar.FormatUSTAR, Typeflag: tar.TypeReg}
		if d.IsDir() {
			hdr.Name, hdr.Mode, hdr.Typeflag = name+"/", 0o755, tar.TypeDir
			return tw.WriteHeader(hdr)
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s: not a regular file", p)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		hdr.Size = int64(len(data))
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("tar header of %s: %w", name, err)
		}
		_, err = tw.Write(data)
		return err
	})
	if err != nil {
		return fmt.Errorf("archiving %s: %w", dir, err)
	}
	if err := errors.Join(tw.Close(), f.Close()); err != nil {
		return fmt.Errorf("closing %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		return fmt.Errorf("renaming %s: %w", tmp, err)
	}
	return nil
}

// names lists the entries' paths, for the layer's history.
func names(entries []entry) string {
	var out []string
	for _, e := range entries {
		out = append(out, "/"+path.Clean(e.name))
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}
