package cri

import (
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestFsInfoOf: the runtimes' documented ImageFsInfo answers and the
// layout the kubelet decides from them (IsContainerFsSeparateFromImageFs:
// both lists reported, their first mountpoints different).
func TestFsInfoOf(t *testing.T) {
	fs := func(mountpoint string, used uint64) *runtimeapi.FilesystemUsage {
		return &runtimeapi.FilesystemUsage{
			Timestamp:  1,
			FsId:       &runtimeapi.FilesystemIdentifier{Mountpoint: mountpoint},
			UsedBytes:  &runtimeapi.UInt64Value{Value: used},
			InodesUsed: &runtimeapi.UInt64Value{Value: used / 4096},
		}
	}
	const (
		containerd = "/var/lib/containerd/io.containerd.snapshotter.v1.overlayfs"
		// CRI-O (server/image_fs_info.go, getStorageFsInfo): without an
		// imagestore, <graphroot>/<driver>-images for both lists; with
		// one, <imagestore>/<driver>-images for images and
		// <graphroot>/<driver>-containers for containers.
		crioImages     = "/var/lib/containers/storage/overlay-images"
		crioContainers = "/var/lib/containers/storage/overlay-containers"
		crioImageStore = "/mnt/imagestore/overlay-images"
	)
	tests := []struct {
		name                 string
		resp                 *runtimeapi.ImageFsInfoResponse
		wantImage, wantSplit string // wantSplit: the container filesystem apart, "" for none
		wantErr              bool
	}{
		{"containerd 1.6: images alone", &runtimeapi.ImageFsInfoResponse{
			ImageFilesystems: []*runtimeapi.FilesystemUsage{fs(containerd, 1<<30)}}, containerd, "", false},
		{"containerd 2: the same snapshotter for both", &runtimeapi.ImageFsInfoResponse{
			ImageFilesystems:     []*runtimeapi.FilesystemUsage{fs(containerd, 1<<30)},
			ContainerFilesystems: []*runtimeapi.FilesystemUsage{fs(containerd, 1<<30)}}, containerd, "", false},
		{"CRI-O, one graphroot", &runtimeapi.ImageFsInfoResponse{
			ImageFilesystems:     []*runtimeapi.FilesystemUsage{fs(crioImages, 2<<30)},
			ContainerFilesystems: []*runtimeapi.FilesystemUsage{fs(crioImages, 2<<30)}}, crioImages, "", false},
		{"CRI-O with an imagestore: split", &runtimeapi.ImageFsInfoResponse{
			ImageFilesystems:     []*runtimeapi.FilesystemUsage{fs(crioImageStore, 3<<30)},
			ContainerFilesystems: []*runtimeapi.FilesystemUsage{fs(crioContainers, 1<<30)}}, crioImageStore, crioContainers, false},
		{"container filesystem without a mountpoint", &runtimeapi.ImageFsInfoResponse{
			ImageFilesystems:     []*runtimeapi.FilesystemUsage{fs(crioImages, 1)},
			ContainerFilesystems: []*runtimeapi.FilesystemUsage{{FsId: &runtimeapi.FilesystemIdentifier{}}}}, crioImages, "", false},
		{"no image filesystem", &runtimeapi.ImageFsInfoResponse{
			ContainerFilesystems: []*runtimeapi.FilesystemUsage{fs(crioContainers, 1)}}, "", "", true},
		{"an image filesystem without a mountpoint", &runtimeapi.ImageFsInfoResponse{
			ImageFilesystems: []*runtimeapi.FilesystemUsage{{UsedBytes: &runtimeapi.UInt64Value{Value: 1}}}}, "", "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			info, err := fsInfoOf(tc.resp)
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want error %v", err, tc.wantErr)
			}
			if got := info.ImageMountpoint(); got != tc.wantImage {
				t.Errorf("image mountpoint %q, want %q", got, tc.wantImage)
			}
			if got := info.ContainerMountpoint(); got != tc.wantSplit {
				t.Errorf("container mountpoint apart %q, want %q", got, tc.wantSplit)
			}
			if info.Split() != (tc.wantSplit != "") {
				t.Errorf("Split() = %v, want %v", info.Split(), tc.wantSplit != "")
			}
			if !tc.wantErr && (info.Images[0].UsedBytes == nil || *info.Images[0].UsedBytes != tc.resp.ImageFilesystems[0].UsedBytes.Value) {
				t.Errorf("image filesystem's used bytes %v, want the runtime's", info.Images[0].UsedBytes)
			}
		})
	}
}
