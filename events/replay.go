package events

// JobReplayed is appended to a finished job's stream when it is replayed
// as a new job (job replay): the job itself does not change.
const JobReplayed = "job.replayed"

// Replayed is the data of job.replayed.
type Replayed struct {
	ReplayJobID string `json:"replay_job_id"`
}
