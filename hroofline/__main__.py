from hroofline.cli.main import main

raise SystemExit(main())
