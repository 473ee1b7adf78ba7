package extract

import "testing"

func TestReservedDeviceName(t *testing.T) {
	for name, want := range map[string]bool{
		"CON": true, "con": true, "nul.txt": true, "Aux.tar.gz": true, "PRN ": true, "COM1": true,
		"lpt9.log": true, "COM0": false, "COM10": false, "CONSOLE": false, "xNUL": false,
		"NUL_": false, "readme": false, "": false, ".nul": false,
	} {
		if got := reservedDeviceName(name); got != want {
			t.Errorf("reservedDeviceName(%q) = %v, want %v", name, got, want)
		}
	}
}
