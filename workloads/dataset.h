/* dataset.h — in-memory image classification datasets (uint8 pixels, NHWC) and their readers.
 *
 * A dataset owns two malloc'd arrays: images (n,h,w,c) uint8 and labels (n) int32 (any class count up to
 * DATASET_MAX_CLASSES: ImageNet's 1000 and beyond; the IDX and CIFAR files keep their byte labels). Readers
 * validate everything (magic, dimensions, counts, label range, stream integrity) and on failure
 * return a negative status with a one-line message naming the file and the fault; they never
 * leave a half-filled dataset behind (out is zeroed on failure). Not thread-safe to build;
 * read-only once built, so any number of workers may read it concurrently.
 */
#ifndef TB_DATASET_H
#define TB_DATASET_H

#include <stddef.h>
#include <stdint.h>

#define DATASET_DEFAULT_DIR "/usr/share/datasets/fashion-mnist"
/* The most classes a dataset (and --classes) may have; labels are int32 in memory. */
#define DATASET_MAX_CLASSES 100000

struct dataset {
    int n;            /* samples */
    int h, w, c;      /* per-sample shape, NHWC */
    int n_classes;    /* labels are in [0, n_classes) */
    uint8_t *images;  /* (n,h,w,c) */
    int32_t *labels;  /* (n) in [0, n_classes) */
    char name[64];    /* what was loaded: "fashion-mnist", "mnist", "idx" (another IDX set), "cifar10", "synthetic", ... */
    char source[512]; /* directory or "synthetic" */
    char note[320];   /* what a reader chose where the directory left a choice ("" if none): the caller says it */
};

/* Reads an IDX image file (magic 0x00000803) and label file (0x00000801), gzip or plain, into out. */
int idx_load(const char *images_path, const char *labels_path, int n_classes, struct dataset *out);
/* Loads the train (train != 0) or test split of an IDX set in dir, trying the standard file names
 * (train-images-idx3-ubyte, t10k-...; with or without .gz; also the "-idx3-ubyte" → ".idx3-ubyte" variant);
 * any byte label, n_classes 10 or the largest label + 1 if more (EMNIST). */
int idx_load_dir(const char *dir, int train, struct dataset *out);
/* Loads CIFAR-10's binary format from dir (data_batch_1..5.bin for train, test_batch.bin for test). */
int cifar10_load_dir(const char *dir, int train, struct dataset *out);
/* Return 1 if dir holds files of that format, or files of its names that cannot be read (the loader
 * then says why); dataset_load_dir picks a reader with them. */
int idx_probe_dir(const char *dir);
int cifar10_probe_dir(const char *dir);
/* Loads whatever dir holds: an IDX set or a CIFAR-10 binary set; a clear error if neither. */
int dataset_load_dir(const char *dir, int train, struct dataset *out);
/* Checks that a test split has the training split's image shape (TB_EFORMAT naming both if not) and gives
 * both splits the larger of their class counts (IDX's is read off each split's labels). */
int dataset_check_pair(struct dataset *train, struct dataset *test);
/* Builds a deterministic synthetic set: n samples of shape (h,w,c), labels in [0,n_classes), learnable
 * (each class has its own mean pattern plus seeded noise), a pure function of (seed, train, n, shape). */
int dataset_synthetic(int n, int h, int w, int c, int n_classes, uint64_t seed, int train, struct dataset *out);
/* Resamples every image to (h,w) bilinearly and to c channels (1 → 3 replicates; 3 → 1 averages). */
int dataset_resize(const struct dataset *in, int h, int w, int c, struct dataset *out);
/* Frees the arrays and zeroes ds (safe on a zeroed dataset). */
void dataset_free(struct dataset *ds);

#endif
