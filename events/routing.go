package events

// DroppedRoute is a job a route asked for that a completion did not
// enqueue: which route, at what depth, and why.
type DroppedRoute struct {
	Plugin    string `json:"plugin"`
	Command   string `json:"command"`
	EventType string `json:"event_type"`
	Depth     int    `json:"depth"` // the depth the child would have had
	Limit     int    `json:"limit"` // service.max_route_depth; 0 when the reason is not the depth (its plugin cannot run)
	Reason    string `json:"reason"`
}
