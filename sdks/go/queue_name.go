package conveyor

// maxNameBytes bounds a queue name (1,024 bytes), as the server bounds
// queue names, task types and keys.
const maxNameBytes = 1024

// validQueueName reports whether name matches ^[a-zA-Z0-9][a-zA-Z0-9-_.]*$
// and is at most maxNameBytes long: the server's rule for a queue name,
// which a Worker checks before its Hello, so that a bad name fails
// NewWorker rather than every session. TestQueueNameRuleIsTheServers pins
// it to the server's.
func validQueueName(name string) bool {
	if name == "" || len(name) > maxNameBytes {
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

// maxEchoBytes bounds how much of a name an error message quotes.
const maxEchoBytes = 64

// truncateName is name cut to maxEchoBytes for an error message.
func truncateName(name string) string { return boundText(name, maxEchoBytes) }
