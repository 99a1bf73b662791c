package wire

// ValidQueueName reports whether name matches ^[a-zA-Z0-9][a-zA-Z0-9-_.]*$
// and is at most MaxNameBytes long (queue names and cron ids).
func ValidQueueName(name string) bool {
	if name == "" || len(name) > MaxNameBytes {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || c != '-' && c != '_' && c != '.') {
			return false
		}
	}
	return true
}
