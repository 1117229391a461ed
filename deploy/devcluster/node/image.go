package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"runtime"
	"sort"
	"strings"
	"time"
)

// OCI image-spec media types and annotations.
const (
	mediaIndex    = "application/vnd.oci.image.index.v1+json"
	mediaManifest = "application/vnd.oci.image.manifest.v1+json"
	mediaConfig   = "application/vnd.oci.image.config.v1+json"
	mediaLayer    = "application/vnd.oci.image.layer.v1.tar+gzip"
	// containerd names an imported image after this annotation of its
	// index entry; the OCI ref name alone is dropped by `ctr images import`
	// unless --base-name is given.
	annotationContainerdName = "io.containerd.image.name"
	annotationRefName        = "org.opencontainers.image.ref.name"
)

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Platform    *platform         `json:"platform,omitempty"`
}

type platform struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
}

type index struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType,omitempty"`
	Manifests     []descriptor `json:"manifests"`
}

type fileSpec struct{ src, dest string }

type files []fileSpec

func (f *files) String() string { return fmt.Sprint(*f) }
func (f *files) Set(v string) error {
	src, dest, ok := strings.Cut(v, "=")
	if !ok || src == "" || !strings.HasPrefix(dest, "/") {
		return fmt.Errorf("want SRC=/DEST, got %q", v)
	}
	*f = append(*f, fileSpec{src, dest})
	return nil
}

type strs []string

func (s *strs) String() string     { return strings.Join(*s, " ") }
func (s *strs) Set(v string) error { *s = append(*s, v); return nil }

// imageMain: devcluster-node image --ref REF --add SRC=/DEST... [--entrypoint ARG]... -o OUT
// writes a one-layer OCI image archive (a tar of an OCI image layout) for
// `ctr images import`, without a registry or a container engine.
func imageMain(args []string) error {
	fs := flag.NewFlagSet("image", flag.ExitOnError)
	ref := fs.String("ref", "", "image reference, e.g. localhost/devcluster/pause:1")
	out := fs.String("o", "", "output archive")
	user := fs.String("user", "", "image config User (empty: root)")
	var add files
	var entrypoint, env strs
	fs.Var(&add, "add", "SRC=/DEST: put the file SRC at /DEST in the image (mode kept), repeatable")
	fs.Var(&entrypoint, "entrypoint", "an entrypoint argument, repeatable")
	fs.Var(&env, "env", "NAME=VALUE in the image config, repeatable")
	_ = fs.Parse(args)
	if *ref == "" || *out == "" || len(add) == 0 {
		return errors.New("usage: devcluster-node image --ref REF --add SRC=/DEST... [--entrypoint ARG]... [--env K=V]... [--user U] -o OUT")
	}
	return writeImage(*out, *ref, add, entrypoint, env, *user)
}

func writeImage(out, ref string, add []fileSpec, entrypoint, env []string, user string) error {
	// The layer: the files, with their parent directories, owned by root,
	// with a fixed mtime so that the same inputs give the same digests.
	epoch := time.Unix(0, 0)
	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	dirs := map[string]bool{}
	for _, f := range add {
		for d := path.Dir(f.dest); d != "/" && !dirs[d]; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	dirList := make([]string, 0, len(dirs))
	for d := range dirs {
		dirList = append(dirList, d)
	}
	sort.Strings(dirList)
	for _, d := range dirList {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: strings.TrimPrefix(d, "/") + "/", Mode: 0o755, ModTime: epoch}); err != nil {
			return err
		}
	}
	for _, f := range add {
		data, err := os.ReadFile(f.src)
		if err != nil {
			return err
		}
		st, err := os.Stat(f.src)
		if err != nil {
			return err
		}
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(f.dest, "/"), Mode: int64(st.Mode().Perm()), Size: int64(len(data)), ModTime: epoch}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if _, err := tw.Write(data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	diffID := digest(layer.Bytes())
	var gz bytes.Buffer
	zw, err := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	if err != nil {
		return err
	}
	if _, err := zw.Write(layer.Bytes()); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}

	if len(env) == 0 {
		env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	}
	config, err := json.Marshal(map[string]any{
		"architecture": runtime.GOARCH,
		"os":           "linux",
		"created":      epoch.UTC().Format(time.RFC3339),
		"config": map[string]any{
			"Entrypoint": entrypoint,
			"Env":        env,
			"User":       user,
			"WorkingDir": "/",
		},
		"rootfs":  map[string]any{"type": "layers", "diff_ids": []string{diffID}},
		"history": []map[string]any{{"created": epoch.UTC().Format(time.RFC3339), "created_by": "devcluster-node image"}},
	})
	if err != nil {
		return err
	}
	manifest, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     mediaManifest,
		"config":        descriptor{MediaType: mediaConfig, Digest: digest(config), Size: int64(len(config))},
		"layers":        []descriptor{{MediaType: mediaLayer, Digest: digest(gz.Bytes()), Size: int64(gz.Len())}},
	})
	if err != nil {
		return err
	}
	tag := ref[strings.LastIndex(ref, ":")+1:]
	if strings.Contains(tag, "/") || tag == ref {
		return fmt.Errorf("image reference %q has no tag", ref)
	}
	idx, err := json.Marshal(index{SchemaVersion: 2, MediaType: mediaIndex, Manifests: []descriptor{{
		MediaType: mediaManifest, Digest: digest(manifest), Size: int64(len(manifest)),
		Annotations: map[string]string{annotationContainerdName: ref, annotationRefName: tag},
		Platform:    &platform{Architecture: runtime.GOARCH, OS: "linux"},
	}}})
	if err != nil {
		return err
	}

	tmp := out + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	aw := tar.NewWriter(f)
	entry := func(name string, data []byte) error {
		if err := aw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(data)), ModTime: epoch}); err != nil {
			return err
		}
		_, err := aw.Write(data)
		return err
	}
	for _, d := range []string{"blobs/", "blobs/sha256/"} {
		if err := aw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: 0o755, ModTime: epoch}); err != nil {
			return err
		}
	}
	for _, e := range []struct {
		name string
		data []byte
	}{
		{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{"index.json", idx},
		{blobPath(gz.Bytes()), gz.Bytes()},
		{blobPath(config), config},
		{blobPath(manifest), manifest},
	} {
		if err := entry(e.name, e.data); err != nil {
			return err
		}
	}
	if err := aw.Close(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, out)
}

func digest(b []byte) string { return fmt.Sprintf("sha256:%x", sha256.Sum256(b)) }

func blobPath(b []byte) string { return "blobs/sha256/" + strings.TrimPrefix(digest(b), "sha256:") }

// archiveNames reads an image archive's index.json (OCI) or manifest.json
// (docker save) and returns, per index entry, the name containerd will give
// it and whether `ctr images import` needs --base-name for it: an OCI
// archive whose entries carry only org.opencontainers.image.ref.name gets no
// name from ctr 1.6 without --base-name.
func archiveNames(archive string) (names []string, baseNames []string, err error) {
	f, err := os.Open(archive)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	var idx *index
	docker := false
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, nil, fmt.Errorf("reading %s as a tar archive: %w", archive, err)
		}
		switch path.Clean(hdr.Name) {
		case "index.json":
			idx = &index{}
			if err := json.NewDecoder(tr).Decode(idx); err != nil {
				return nil, nil, fmt.Errorf("%s: index.json: %w", archive, err)
			}
		case "manifest.json":
			var m []struct{ RepoTags []string }
			if err := json.NewDecoder(tr).Decode(&m); err == nil {
				docker = true
				for _, e := range m {
					names = append(names, e.RepoTags...)
				}
			}
		}
	}
	if idx == nil {
		if docker {
			return names, nil, nil
		}
		return nil, nil, fmt.Errorf("%s has neither index.json (OCI layout) nor manifest.json (docker save)", archive)
	}
	names = nil
	seen := map[string]bool{}
	for _, m := range idx.Manifests {
		if n := m.Annotations[annotationContainerdName]; n != "" {
			names = append(names, n)
			continue
		}
		ref := m.Annotations[annotationRefName]
		// A full reference (repository:tag) as the OCI ref name: ctr keeps
		// it when --base-name is its repository.
		if i := strings.LastIndex(ref, ":"); i > 0 && !strings.Contains(ref[i:], "/") {
			names = append(names, ref)
			if base := ref[:i]; !seen[base] {
				seen[base] = true
				baseNames = append(baseNames, base)
			}
		}
	}
	if len(names) == 0 {
		return nil, nil, fmt.Errorf("%s: no entry of index.json names its image (annotation %s, or %s holding a full repository:tag reference)",
			archive, annotationContainerdName, annotationRefName)
	}
	return names, baseNames, nil
}
