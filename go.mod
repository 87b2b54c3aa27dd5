module chatmem

go 1.26
