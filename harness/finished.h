/* finished.h — a checkpoint directory's note that its training (or tta) run finished and wrote its row.
 *
 * A run's last checkpoint is written before its evaluation and row, so a checkpoint at the final step
 * alone does not say whether the row exists (a kill during the evaluation leaves the checkpoint and no
 * row: resuming must then evaluate and write it). After the row, the run leaves DIR/finished.json
 * ({"finished_step", "run_id", "out"}); a later --resume of the same steps finds it and has nothing to
 * do, instead of writing the same result again. Extending the run (a larger --steps) ignores it. A note that
 * is there but cannot be read stops such a resume (exit 1): whether the row exists cannot be told; so it does a
 * resume that set a damaged newer checkpoint aside (the run may have finished past the one it took).
 * The tta plan leaves it too, at the plan step of its last seed's end (every seed's steps).
 * Threading: stateless.
 */
#ifndef TB_FINISHED_H
#define TB_FINISHED_H

#include <stddef.h>

/* The note's file name in its directory. */
#define FINISHED_NOTE_NAME "finished.json"

/* Writes dir/finished.json (atomically: a temporary file renamed) for a run that finished at step with
 * its row in out; TB_OK or TB_EIO. */
int finished_mark(const char *dir, long step, const char *run_id, const char *out);

/* Whether dir/finished.json records a run finished at exactly step: 1 (note receives "finished at step N; its row
 * is in OUT (run ID)"), 0 (no note, or one of another step), or -1 with the error set (the reason, without the
 * path) when a note is there but is not one finished_mark wrote. */
int finished_at(const char *dir, long step, char *note, size_t n);

/* The note of dir: 1 with the step it records in *step (and note as finished_at's), 0 where there is none, -1 with the
 * error set where one is there but is not one finished_mark wrote. */
int finished_read(const char *dir, long *step, char *note, size_t n);

/* After finished_at or finished_read returned -1 (the reason set): sets the refusal of the resume, naming dir's note, its
 * reason and step (none where step < 0), and how to go on (TB_EIO); returns -1. */
int finished_refuse(const char *dir, long step);

/* finished_at for --resume of a run at its last step: 1 or 0 as finished_at; a note that cannot be read is a
 * warning naming it, then -1 with the error set (TB_EIO) saying the resume is refused and how to go on. */
int finished_check(const char *dir, long step, char *note, size_t n);

#endif
