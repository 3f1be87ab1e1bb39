package cli

import (
	"encoding/json"
	"flag"
	"fmt"
	"strconv"

	"github.com/go-logr/logr"
	"github.com/sirupsen/logrus"
	"k8s.io/klog/v2"
)

// klogVerbosity maps a logrus level to the highest klog verbosity worth
// producing: klog drops V(n) calls above its own -v before they reach the
// sink, so it must be told what the sink would keep.
func klogVerbosity(l logrus.Level) int {
	switch {
	case l >= logrus.TraceLevel:
		return 10
	case l >= logrus.DebugLevel:
		return 4
	case l >= logrus.InfoLevel:
		return 1
	}
	return 0
}

// logrusLevel maps a klog/logr verbosity to a logrus level: V(0) and V(1)
// are what client-go considers operator-relevant, V(2)-V(4) debugging
// detail, V(5) and above (request traces) tracing.
func logrusLevel(v int) logrus.Level {
	switch {
	case v <= 1:
		return logrus.InfoLevel
	case v <= 4:
		return logrus.DebugLevel
	}
	return logrus.TraceLevel
}

// routeKlog sends everything client-go logs through klog (leader election,
// reflectors, the event broadcaster) to logger, so that it follows
// --log-format and --log-level like the rest. klog has no warning level in
// logr: its warnings arrive as V(0) info.
func routeKlog(logger *logrus.Logger) {
	var fs flag.FlagSet
	klog.InitFlags(&fs)
	_ = fs.Set("v", strconv.Itoa(klogVerbosity(logger.GetLevel())))
	klog.SetLoggerWithOptions(logr.New(&logrusSink{logger: logger, name: "klog"}), klog.ContextualLogger(true))
}

// logrusSink is a logr.LogSink writing to a logrus logger. It reads the
// logger's level at every call, so later level changes apply.
type logrusSink struct {
	logger *logrus.Logger
	name   string
	fields logrus.Fields
}

var _ logr.LogSink = (*logrusSink)(nil)

func (s *logrusSink) Init(logr.RuntimeInfo) {}

func (s *logrusSink) Enabled(level int) bool { return s.logger.IsLevelEnabled(logrusLevel(level)) }

func (s *logrusSink) Info(level int, msg string, kv ...any) {
	s.entry(kv).Log(logrusLevel(level), msg)
}

func (s *logrusSink) Error(err error, msg string, kv ...any) {
	e := s.entry(kv)
	if err != nil {
		e = e.WithError(err)
	}
	e.Error(msg)
}

func (s *logrusSink) WithValues(kv ...any) logr.LogSink {
	c := *s
	c.fields = addFields(logrus.Fields{}, s.fields, kv)
	return &c
}

func (s *logrusSink) WithName(name string) logr.LogSink {
	c := *s
	c.name = s.name + "/" + name
	return &c
}

func (s *logrusSink) entry(kv []any) *logrus.Entry {
	f := addFields(logrus.Fields{"logger": s.name}, s.fields, kv)
	return s.logger.WithFields(f)
}

// addFields copies base into f and adds the logr key/value pairs, with
// values made safe for logrus' JSON formatter, which drops the whole line
// when one field does not marshal.
func addFields(f, base logrus.Fields, kv []any) logrus.Fields {
	for k, v := range base {
		f[k] = v
	}
	for i := 0; i < len(kv); i += 2 {
		key, ok := kv[i].(string)
		if !ok {
			key = fmt.Sprint(kv[i])
		}
		if i+1 == len(kv) {
			f[key] = "<no value>"
			break
		}
		f[key] = fieldValue(kv[i+1])
	}
	return f
}

// A Stringer wins over a logr.Marshaler so that object references read
// "namespace/name" in both formats, as in klog's own text output.
func fieldValue(v any) any {
	switch x := v.(type) {
	case nil, string, bool, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, float32, float64, error:
		return v
	case fmt.Stringer:
		return stringOf(x)
	case logr.Marshaler:
		v = x.MarshalLog()
	}
	if _, err := json.Marshal(v); err != nil {
		return fmt.Sprintf("%+v", v)
	}
	return v
}

// stringOf calls String, which may panic on a nil pointer receiver; a log
// line must never take the process down.
func stringOf(s fmt.Stringer) (out string) {
	defer func() {
		if r := recover(); r != nil {
			out = fmt.Sprintf("<String panicked: %v>", r)
		}
	}()
	return s.String()
}
