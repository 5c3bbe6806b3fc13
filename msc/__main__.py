from msc.cli.main import main

raise SystemExit(main())
