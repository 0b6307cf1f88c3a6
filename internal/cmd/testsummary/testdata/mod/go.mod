module example.com/tsmod

go 1.22
